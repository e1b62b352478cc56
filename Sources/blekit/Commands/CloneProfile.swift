// Turning a device's GATT tree and advertisement (as `blekit clone` read them) into a
// `blekit serve` profile: the JSON docs/serve.md describes, with notes on what was left out.

import ArgumentParsing
import BLEKit
import JSON

/// Builds a serve profile from what a walk read.
struct CloneProfile {
  /// What bluetoothd serves on every adapter itself: GAP (0x1800) and GATT (0x1801).
  static let bluezServices: Set<BluetoothUUID> = [
    BluetoothUUID(uint16: 0x1800), BluetoothUUID(uint16: 0x1801),
  ]
  /// Device Information (0x180A) with only PnP ID (0x2A50) is what bluetoothd serves itself when
  /// main.conf sets `DeviceID`.
  static let deviceInformation = BluetoothUUID(uint16: 0x180A)
  static let pnpID = BluetoothUUID(uint16: 0x2A50)
  /// Descriptors bluetoothd adds to served characteristics itself (serve refuses them):
  /// Extended Properties (0x2900) and Client Characteristic Configuration (0x2902).
  static let bluezDescriptors: Set<BluetoothUUID> = [
    BluetoothUUID(uint16: 0x2900), BluetoothUUID(uint16: 0x2902),
  ]
  /// How often the twin notifies the value it read (the profile can be edited after).
  static let notifyInterval = 1

  /// Properties serve publishes, in its spelling.
  static let servedProperties: [(String, CharacteristicProperties)] = [
    ("read", .read), ("write", .write), ("write-without-response", .writeWithoutResponse),
    ("notify", .notify), ("indicate", .indicate),
  ]
  /// Security flags bluetoothd may report, which serve takes as permissions.
  static let permissionFlags = [
    "encrypt-read", "encrypt-write", "encrypt-authenticated-read", "encrypt-authenticated-write",
    "secure-read", "secure-write",
  ]

  /// The device, e.g. `00:AA:01:00:00:01` (for the notes).
  var source: String
  var tree: [ExploredService]
  var advertisement: PeripheralAdvertisement
  /// Notifications heard (`--listen`), by ``key(service:characteristic:)``, in order.
  var recorded: [String: [GattWalk.Heard]] = [:]

  /// Where ``recorded`` keeps a characteristic's notifications.
  static func key(service: BluetoothUUID, characteristic: BluetoothUUID) -> String {
    "\(service.uuidString) \(characteristic.uuidString)"
  }

  /// The profile, or why there is nothing to serve.
  func profile() throws(CLIError) -> JSONValue {
    var notes = ["cloned from \(source) by blekit clone"]
    let genericAccess = BluetoothUUID(uint16: 0x1800)
    if !tree.contains(where: { $0.service.uuid == genericAccess }) {
      // bluetoothd's GATT client keeps GAP to itself (its gap profile reads the device's name
      // and appearance into Device1), so the clone never sees the device's 1800.
      notes.append(
        "service 1800 not shown by bluetoothd: the twin's Generic Access is the serving "
          + "bluetoothd's own (the device name is that adapter's alias)")
    }
    var services: [JSONValue] = []
    for explored in tree {
      let uuid = explored.service.uuid
      if Self.bluezServices.contains(uuid) {
        notes.append(
          "service \(uuidLabel(uuid)) left out: bluetoothd serves "
            + "\(AssignedNumbers.serviceName(uuid) ?? "it") itself")
        continue
      }
      if uuid == Self.deviceInformation,
        explored.characteristics.map(\.characteristic.uuid) == [Self.pnpID]
      {
        notes.append(
          "service 180a with only PnP ID left out: bluetoothd serves it itself (DeviceID)")
        continue
      }
      var characteristics: [JSONValue] = []
      for item in explored.characteristics {
        if let json = characteristic(item, in: uuid) {
          characteristics.append(json)
        } else {
          notes.append(
            "characteristic \(uuidLabel(item.characteristic.uuid)) of service \(uuidLabel(uuid)) "
              + "left out: serve publishes none of its flags "
              + "(\(item.characteristic.flags.joined(separator: ", ")))")
        }
      }
      if characteristics.isEmpty {
        notes.append("service \(uuidLabel(uuid)) left out: it has no characteristics")
        continue
      }
      var fields: [JSONValue.Field] = [.init("uuid", .string(uuidLabel(uuid)))]
      if let name = AssignedNumbers.serviceName(uuid) {
        fields.append(.init("name", .string(name)))
      }
      if !explored.service.isPrimary { fields.append(.init("primary", .bool(false))) }
      fields.append(.init("characteristics", .array(characteristics)))
      services.append(.object(fields))
    }
    guard !services.isEmpty else {
      throw CLIError(
        ExitStatusMapping.nothingToClone,
        "\(source) has no services to clone besides those bluetoothd serves itself")
    }
    let (advertise, left) = advertiseFields(services: services)
    notes += left
    return .object([
      .init("notes", .array(notes.map { .string($0) })), .init("advertise", .object(advertise)),
      .init("services", .array(services)),
    ])
  }

  /// The characteristic's profile entry; nil when it has none of the properties serve
  /// publishes (e.g. only `broadcast` or `authenticated-signed-writes`).
  func characteristic(_ item: ExploredCharacteristic, in service: BluetoothUUID) -> JSONValue? {
    let characteristic = item.characteristic
    guard Self.servedProperties.contains(where: { characteristic.properties.contains($0.1) })
    else { return nil }
    var fields: [JSONValue.Field] = [.init("uuid", .string(uuidLabel(characteristic.uuid)))]
    if let name = AssignedNumbers.characteristicName(characteristic.uuid) {
      fields.append(.init("name", .string(name)))
    }
    let properties = characteristic.properties
    fields.append(
      .init(
        "properties",
        .array(Self.servedProperties.filter { properties.contains($0.1) }.map { .string($0.0) })
      ))
    let permissions = Self.permissionFlags.filter(characteristic.flags.contains)
    if !permissions.isEmpty {
      fields.append(.init("permissions", .array(permissions.map { .string($0) })))
    }
    var notes: [String] = []
    let dropped = characteristic.flags.filter { flag in
      !Self.servedProperties.contains { $0.0 == flag } && !Self.permissionFlags.contains(flag)
    }
    if !dropped.isEmpty {
      notes.append("flags serve cannot publish left out: \(dropped.joined(separator: ", "))")
    }
    var readValue: [UInt8] = []
    if properties.contains(.read) {
      switch item.read {
      case .value(let bytes):
        readValue = Array(bytes.prefix(ServeProfile.maximumValueLength))
        fields.append(.init("value", Self.value(readValue)))
      case .failed(let failure):
        let error = Self.readError(failure)
        fields.append(.init("readError", .string(error.name)))
        notes.append("reading it failed: \(failure.description)")
      case .notRead:
        fields.append(.init("value", Self.value([])))
        notes.append("not read")
      }
    }
    if properties.contains(.notify) || properties.contains(.indicate) {
      let heard = recorded[Self.key(service: service, characteristic: characteristic.uuid)] ?? []
      if let (notifier, note) = Self.replaying(heard) {
        fields.append(.init("notifier", notifier))
        notes.append(note)
      } else {
        fields.append(
          .init(
            "notifier",
            .object([
              .init("every", .int(Self.notifyInterval)), .init("value", Self.value(readValue)),
            ])
          ))
      }
    }
    var descriptors: [JSONValue] = []
    var seen = Set<BluetoothUUID>()
    for explored in item.descriptors {
      let uuid = explored.descriptor.uuid
      guard !Self.bluezDescriptors.contains(uuid) else { continue }
      guard seen.insert(uuid).inserted else {
        notes.append("a second descriptor \(uuidLabel(uuid)) left out")
        continue
      }
      var descriptor: [JSONValue.Field] = [.init("uuid", .string(uuidLabel(uuid)))]
      switch explored.read {
      case .value(let bytes):
        descriptor.append(
          .init("value", Self.value(Array(bytes.prefix(ServeProfile.maximumValueLength)))))
      case .failed(let failure):
        descriptor.append(.init("value", Self.value([])))
        descriptor.append(.init("note", .string("reading it failed: \(failure.description)")))
      case .notRead:
        descriptor.append(.init("value", Self.value([])))
      }
      descriptors.append(.object(descriptor))
    }
    if !descriptors.isEmpty { fields.append(.init("descriptors", .array(descriptors))) }
    if !notes.isEmpty { fields.append(.init("note", .string(notes.joined(separator: "; ")))) }
    return .object(fields)
  }

  /// A notifier replaying what was heard (at most a cycle's worth), one value per mean gap
  /// between them (1 s for a single value); nil when nothing was heard.
  static func replaying(_ heard: [GattWalk.Heard]) -> (JSONValue, String)? {
    guard let first = heard.first, let last = heard.last else { return nil }
    let kept = Array(heard.prefix(ProfileDecoder.maximumCycleLength))
    var interval = 1.0
    if heard.count > 1 {
      let mean = (last.seconds - first.seconds) / Double(heard.count - 1)
      interval = min(max((mean * 1000).rounded() / 1000, 0.01), 3600)
    }
    let values = kept.map { value(Array($0.value.prefix(ServeProfile.maximumValueLength))) }
    let cut = heard.count > kept.count ? " (the first \(kept.count) kept)" : ""
    return (
      .object([
        .init("every", .number(interval)),
        .init("value", .object([.init("cycle", .array(values))])),
      ]),
      "replays the \(heard.count) notifications heard\(cut), one every \(interval) s"
    )
  }

  /// `{"text": ...}` when the bytes are printable UTF-8, else `{"hex": ...}`.
  static func value(_ bytes: [UInt8]) -> JSONValue {
    if let text = printableText(bytes), Array(text.utf8) == bytes {
      return .object([.init("text", .string(text))])
    }
    return .object([.init("hex", .string(HexBytes.format(bytes)))])
  }

  /// The ATT error behind bluetoothd's answer to a read (see BlueZ's gatt-client.c: each ATT
  /// error becomes a D-Bus error, the rest `Failed` with "ATT error: 0x..").
  static func readError(_ failure: AttributeReadFailure) -> ServeProfile.ReadError {
    // A read over which the link dropped: bluetoothd tried to pair for it (BlueZ 5.66 then
    // answers "ATT error: 0x0e"), so the device wants at least an encrypted link.
    if failure.droppedLink && failure.requirement != .authorization {
      return .insufficientEncryption
    }
    let name = failure.errorName ?? ""
    if name.hasSuffix(".NotAuthorized") { return .insufficientAuthorization }
    if name.hasSuffix(".NotSupported") { return .requestNotSupported }
    if name.hasSuffix(".NotPermitted") {
      // Read Not Permitted is 0x02; "Not paired" stands for 0x05, 0x0F and 0x0C alike:
      // encryption is the least the twin then asks for.
      return failure.attErrorCode == 0x02 ? .readNotPermitted : .insufficientEncryption
    }
    if let code = failure.attErrorCode, code != 0 { return ServeProfile.ReadError(code: code) }
    // 0x0E: Unlikely Error, for a failure without a code.
    return .other(0x0E)
  }

  // MARK: Advertisement

  /// The `advertise` object: what bluetoothd holds of the device's advertisement, cut down to
  /// what fits a legacy advertisement (serve refuses more), and notes on what was cut.
  func advertiseFields(services: [JSONValue]) -> ([JSONValue.Field], [String]) {
    var notes: [String] = []
    let alias = advertisement.alias.flatMap { alias in
      alias.replacingDashes == source ? nil : alias
    }
    var payload = ServeProfile.Advertisement(
      name: advertisement.name ?? alias,
      services: advertisement.serviceUUIDs.filter { !Self.bluezServices.contains($0) },
      appearance: advertisement.appearance, manufacturerData: advertisement.manufacturerData,
      serviceData: advertisement.serviceData)
    if payload.services.isEmpty,
      let first = tree.first(where: {
        !Self.bluezServices.contains($0.service.uuid) && $0.service.isPrimary
      })
    {
      payload.services = [first.service.uuid]
    }
    func fits() -> Bool { (try? payload.payload.validateLegacySize()) != nil }
    // Cut from the least telling: further service UUIDs (after resolution bluetoothd lists
    // every GATT service, advertised or not), service data, manufacturer data, the first
    // service, the name.
    while !fits() {
      if payload.services.count > 1 {
        let last = payload.services.removeLast()
        notes.append("advertised service \(uuidLabel(last)) left out: too long")
      } else if let key = payload.serviceData.keys.sorted(by: { $0.uuidString < $1.uuidString })
        .last
      {
        payload.serviceData[key] = nil
        notes.append("advertised service data of \(uuidLabel(key)) left out: too long")
      } else if let key = payload.manufacturerData.keys.sorted().last {
        payload.manufacturerData[key] = nil
        notes.append(
          "manufacturer data of company 0x\(HexBytes.format([UInt8(key >> 8), UInt8(key & 0xFF)]))"
            + " left out: too long")
      } else if !payload.services.isEmpty {
        notes.append("advertised service \(uuidLabel(payload.services[0])) left out: too long")
        payload.services = []
      } else if let name = payload.name {
        notes.append("advertised name \(JSONValue.quoted(name)) left out: too long")
        payload.name = nil
      } else {
        break
      }
    }
    var fields: [JSONValue.Field] = []
    if let name = payload.name { fields.append(.init("name", .string(name))) }
    fields.append(.init("services", .array(payload.services.map { .string(uuidLabel($0)) })))
    if let appearance = payload.appearance {
      fields.append(.init("appearance", .int(Int(appearance))))
    }
    if !payload.manufacturerData.isEmpty {
      fields.append(
        .init(
          "manufacturerData",
          .object(
            payload.manufacturerData.sorted { $0.key < $1.key }.map { company, bytes in
              JSONValue.Field(
                HexBytes.format([UInt8(company >> 8), UInt8(company & 0xFF)]),
                .string(HexBytes.format(bytes))
              )
            })
        ))
    }
    if !payload.serviceData.isEmpty {
      fields.append(
        .init(
          "serviceData",
          .object(
            payload.serviceData.sorted { $0.key.uuidString < $1.key.uuidString }.map {
              JSONValue.Field(uuidLabel($0.key), .string(HexBytes.format($0.value)))
            })
        ))
    }
    return (fields, notes)
  }
}

extension String {
  /// `00-AA-01-00-00-01` as `00:AA:01:00:00:01` (bluetoothd's alias for a nameless device).
  fileprivate var replacingDashes: String {
    String(map { $0 == "-" ? ":" : $0 })
  }
}
