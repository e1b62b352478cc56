// ServiceData: one service data field of an advertisement (AD types 0x16, 0x20, 0x21): a
// service UUID and its bytes.

import Bluetooth

/// Service data: a service UUID and the bytes associated with it.
///
/// BlueZ reports it in `org.bluez.Device1.ServiceData` as `a{sv}`: the UUID in full 128-bit
/// text as the key, the bytes as the value. In raw advertising data the UUID comes first, in
/// 2, 4 or 16 bytes little-endian according to the AD type.
public struct ServiceData: Hashable, Sendable, CustomStringConvertible {
  /// AD type "Service Data - 16-bit UUID".
  public static let type16: UInt8 = 0x16
  /// AD type "Service Data - 32-bit UUID".
  public static let type32: UInt8 = 0x20
  /// AD type "Service Data - 128-bit UUID".
  public static let type128: UInt8 = 0x21

  /// The service UUID.
  public let uuid: BluetoothUUID
  /// The bytes after the UUID.
  public let data: [UInt8]

  /// Creates service data from BlueZ's form.
  public init(uuid: BluetoothUUID, data: [UInt8]) {
    self.uuid = uuid
    self.data = data
  }

  /// Creates service data from BlueZ's form, the key given as text.
  ///
  /// - Throws: `BluetoothUUID.ParseError` when the key is not a UUID.
  public init(key: String, data: [UInt8]) throws(BluetoothUUID.ParseError) {
    self.init(uuid: try BluetoothUUID(key), data: data)
  }

  /// Reads the payload of a service data AD structure of the given type.
  ///
  /// - Throws: ``BluetoothError/Code/unexpectedADType`` for another AD type,
  ///   ``BluetoothError/Code/advertisingFieldTooShort`` when the payload is shorter than the UUID.
  public init(adType: UInt8, payload: some Collection<UInt8>) throws(BluetoothError) {
    let uuidLength: Int
    switch adType {
    case Self.type16: uuidLength = 2
    case Self.type32: uuidLength = 4
    case Self.type128: uuidLength = 16
    default: throw .unexpectedType(adType)
    }
    let bytes = Array(payload)
    guard bytes.count >= uuidLength else {
      throw .tooShort(field: "service data", count: bytes.count, needed: uuidLength)
    }
    guard let uuid = BluetoothUUID(advertisingBytes: bytes[..<uuidLength]) else {
      throw .invalidUUIDLength(uuidLength)
    }
    self.init(uuid: uuid, data: Array(bytes[uuidLength...]))
  }

  /// The AD type for this UUID's shortest form.
  public var adType: UInt8 {
    switch uuid.advertisingSize {
    case 2: Self.type16
    case 4: Self.type32
    default: Self.type128
    }
  }

  /// The AD payload: the UUID in its shortest form little-endian, then the data.
  public var adPayload: [UInt8] { uuid.advertisingBytes + data }

  /// E.g. `0x180F (Battery): 64`.
  public var description: String {
    let name = AssignedNumbers.serviceName(uuid).map { " (\($0))" } ?? ""
    return "\(HexBytes.uuidLabel(uuid))\(name): \(HexBytes.format(data, separator: " "))"
  }
}
