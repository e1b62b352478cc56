// AdvertisingPayload: the fields of an LE advertisement and the bytes each takes in a legacy
// advertising PDU, so a tool can say why an advertisement does not fit before bluetoothd
// answers a bare org.bluez.Error.Failed.
//
// How bluetoothd lays out a legacy advertisement (BlueZ src/advertising.c, 5.66; documented in
// doc/org.bluez.LEAdvertisement.rst): UUIDs are given in 128-bit form and sent in the shortest
// form (16, 32 or 128 bits); ServiceUUIDs, SolicitUUIDs, ManufacturerData, ServiceData,
// Appearance and TxPower (Includes "tx-power") go into the 31-byte advertising data, which
// must also hold the 3-byte Flags field bluetoothd or the kernel adds for a "peripheral"
// advertisement (general discoverable, and "BR/EDR not supported" on LE-only controllers) or
// when Discoverable is set. LocalName goes into the scan response, truncated to fit (sent as a
// shortened name).

import Bluetooth

/// The fields of an advertisement, as registered with `org.bluez.LEAdvertisingManager1`.
/// `nil` or empty leaves a field out.
public struct AdvertisingPayload: Hashable, Sendable {
  /// `LEAdvertisement1.Type`.
  public enum Kind: String, Hashable, Sendable {
    /// Connectable (`"peripheral"`).
    case peripheral
    /// Non-connectable (`"broadcast"`).
    case broadcast
  }

  /// The advertisement type.
  public var kind: Kind
  /// `LEAdvertisement1.Discoverable`, or `nil` to leave it to the adapter.
  public var discoverable: Bool?
  /// `ServiceUUIDs`.
  public var serviceUUIDs: [BluetoothUUID]
  /// `SolicitUUIDs`.
  public var solicitUUIDs: [BluetoothUUID]
  /// `ManufacturerData`: company ID to bytes (without the company ID).
  public var manufacturerData: [UInt16: [UInt8]]
  /// `ServiceData`: service UUID to bytes.
  public var serviceData: [BluetoothUUID: [UInt8]]
  /// `LocalName` (sent in the scan response).
  public var localName: String?
  /// `Appearance`.
  public var appearance: UInt16?
  /// Whether `Includes` has `"tx-power"`.
  public var includesTxPower: Bool
  /// Whether a Flags field is counted; `nil` applies BlueZ's rule (`includesFlags`).
  public var flagsOverride: Bool?
  /// `SecondaryChannel`: advertise with extended advertising on this PHY (`nil`: legacy, or
  /// bluetoothd's choice). The adapter must list it (``AdvertisingCapabilities``).
  public var secondaryChannel: SecondaryChannel?
  /// `MinInterval` and `MaxInterval`, rounded down to milliseconds (`nil`: the controller's
  /// default). BlueZ 5.66 ignores both unless bluetoothd runs with `--experimental`.
  public var minInterval: Duration?
  public var maxInterval: Duration?

  /// The PHY of the secondary advertising channel (`LEAdvertisement1.SecondaryChannel`).
  public enum SecondaryChannel: String, Hashable, Sendable, CaseIterable {
    case oneM = "1M"
    case twoM = "2M"
    case coded = "Coded"
  }

  /// Creates a payload description.
  public init(
    kind: Kind = .peripheral, discoverable: Bool? = nil, serviceUUIDs: [BluetoothUUID] = [],
    solicitUUIDs: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
    serviceData: [BluetoothUUID: [UInt8]] = [:], localName: String? = nil,
    appearance: UInt16? = nil, includesTxPower: Bool = false, flagsOverride: Bool? = nil,
    secondaryChannel: SecondaryChannel? = nil, minInterval: Duration? = nil,
    maxInterval: Duration? = nil
  ) {
    self.secondaryChannel = secondaryChannel
    self.minInterval = minInterval
    self.maxInterval = maxInterval
    self.kind = kind
    self.discoverable = discoverable
    self.serviceUUIDs = serviceUUIDs
    self.solicitUUIDs = solicitUUIDs
    self.manufacturerData = manufacturerData
    self.serviceData = serviceData
    self.localName = localName
    self.appearance = appearance
    self.includesTxPower = includesTxPower
    self.flagsOverride = flagsOverride
  }

  /// The bytes of a legacy advertising PDU's data, and of its scan response.
  public static let legacyLimit = 31

  /// Whether the 3-byte Flags field is counted. BlueZ's rule, taken conservatively: always for
  /// a `peripheral` advertisement (bluetoothd adds it when the adapter is discoverable, the
  /// kernel adds it on LE-only controllers), and for a `broadcast` one when `discoverable` is
  /// true. A dual-mode adapter that is not discoverable may leave it out of a peripheral
  /// advertisement; this count then errs by 3 bytes on the safe side.
  public var includesFlags: Bool {
    if let flagsOverride { return flagsOverride }
    return kind == .peripheral || discoverable == true
  }

  /// The AD structures of the advertising data and the scan response, with their sizes.
  public func legacySize(limit: Int = legacyLimit) -> AdvertisingPayloadSize {
    var data: [AdvertisingPayloadSize.Field] = []
    if includesFlags { data.append(.init(name: "flags", length: 3)) }
    data += Self.uuidLists(serviceUUIDs, label: "service UUID")
    data += Self.uuidLists(solicitUUIDs, label: "solicited service UUID")
    for (company, bytes) in manufacturerData.sorted(by: { $0.key < $1.key }) {
      data.append(
        .init(name: "manufacturer data \(HexBytes.companyID(company))", length: 4 + bytes.count))
    }
    for (uuid, bytes) in serviceData.sorted(by: { $0.key < $1.key }) {
      data.append(
        .init(
          name: "service data \(HexBytes.uuidLabel(uuid))",
          length: 2 + uuid.advertisingSize + bytes.count))
    }
    if appearance != nil { data.append(.init(name: "appearance", length: 4)) }
    if includesTxPower { data.append(.init(name: "tx power", length: 3)) }

    var scanResponse: [AdvertisingPayloadSize.Field] = []
    var truncated = false
    if let localName {
      let nameLength = localName.utf8.count
      truncated = nameLength > limit - 2
      scanResponse.append(.init(name: "local name", length: 2 + min(nameLength, limit - 2)))
    }
    return AdvertisingPayloadSize(
      advertisingData: data, scanResponse: scanResponse, limit: limit,
      localNameTruncated: truncated)
  }

  /// The sizes, or an error saying which fields take how many bytes when the advertising data
  /// exceeds the limit.
  ///
  /// - Throws: ``BluetoothError/Code/advertisementTooLarge``, with the sizes in
  ///   ``BluetoothError/advertisingPayloadSize``.
  public func validateLegacySize(limit: Int = legacyLimit) throws(BluetoothError)
    -> AdvertisingPayloadSize
  {
    let size = legacySize(limit: limit)
    guard size.fits else { throw .advertisementTooLarge(size) }
    return size
  }

  /// One AD structure per UUID size present: length byte, type byte, the UUIDs.
  private static func uuidLists(_ uuids: [BluetoothUUID], label: String)
    -> [AdvertisingPayloadSize.Field]
  {
    var seen = Set<BluetoothUUID>()
    let unique = uuids.filter { seen.insert($0).inserted }
    return [2, 4, 16].compactMap { size in
      let group = unique.filter { $0.advertisingSize == size }
      guard !group.isEmpty else { return nil }
      let plural = group.count > 1 ? "s" : ""
      return .init(name: "\(size * 8)-bit \(label)\(plural)", length: 2 + size * group.count)
    }
  }
}

/// The bytes an advertisement takes, field by field.
public struct AdvertisingPayloadSize: Hashable, Sendable, CustomStringConvertible {
  /// One AD structure: its name and its bytes (length byte + type byte + data).
  public struct Field: Hashable, Sendable {
    /// A short human name, e.g. `manufacturer data 0xFFFF`.
    public let name: String
    /// The bytes of the whole AD structure.
    public let length: Int

    /// Creates a field.
    public init(name: String, length: Int) {
      self.name = name
      self.length = length
    }
  }

  /// The structures of the advertising data.
  public let advertisingData: [Field]
  /// The structures of the scan response.
  public let scanResponse: [Field]
  /// The limit of each, 31 for legacy advertising.
  public let limit: Int
  /// Whether the local name is longer than the scan response holds (BlueZ truncates it).
  public let localNameTruncated: Bool

  /// The bytes of the advertising data.
  public var advertisingDataLength: Int { advertisingData.reduce(0) { $0 + $1.length } }
  /// The bytes of the scan response.
  public var scanResponseLength: Int { scanResponse.reduce(0) { $0 + $1.length } }
  /// The longest single AD structure bluetoothd builds, whatever the adapter's limit: BlueZ
  /// 5.66 refuses manufacturer or service data of more than 27 bytes (31 with its length,
  /// type and key) with `org.bluez.Error.Failed` even for extended advertising.
  public static let fieldLimit = 31

  /// The fields longer than ``fieldLimit``.
  public var oversizedFields: [Field] { advertisingData.filter { $0.length > Self.fieldLimit } }

  /// Whether the advertising data fits the limit and each field fits ``fieldLimit`` (the scan
  /// response always does: the name is truncated).
  public var fits: Bool { advertisingDataLength <= limit && oversizedFields.isEmpty }

  /// The advertising data fields in one line, e.g. `flags 3, 128-bit service UUID 18`.
  public var breakdown: String {
    advertisingData.isEmpty
      ? "no fields" : advertisingData.map { "\($0.name) \($0.length)" }.joined(separator: ", ")
  }

  public var description: String {
    let limitText =
      limit == AdvertisingPayload.legacyLimit
      ? "legacy limit is \(limit)" : "the adapter's limit (MaxAdvLen) is \(limit)"
    if advertisingDataLength <= limit, let field = oversizedFields.first {
      return "advertisement is \(advertisingDataLength) bytes, \(limitText), but \(field.name) "
        + "takes \(field.length) and bluetoothd builds at most \(Self.fieldLimit) per field: "
        + breakdown
    }
    return "advertisement is \(advertisingDataLength) bytes, \(limitText): \(breakdown)"
  }
}
