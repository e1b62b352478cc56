// org.bluez.GattDescriptor1: a remote GATT descriptor.
import DBus

/// A typed proxy for a remote `org.bluez.GattDescriptor1`
/// (BlueZ's `doc/org.bluez.GattDescriptor.rst`).
public struct GattDescriptor1: BlueZProxy {
  public static let interface = BlueZ.Interface.gattDescriptor

  public let snapshot: ProxySnapshot
  public init(snapshot: ProxySnapshot) { self.snapshot = snapshot }

  /// The descriptor UUID, a lowercase 128-bit string.
  public static let uuid = ProxyProperty<Self, String>(
    "UUID", "s", required: true, decode: Decode.string)
  /// The characteristic the descriptor belongs to.
  public static let characteristic = ProxyProperty<Self, ObjectPath>(
    "Characteristic", "o", required: true, decode: Decode.path)
  public static let value = ProxyProperty<Self, [UInt8]>("Value", "ay", decode: Decode.bytes)
  public static let flags = ProxyProperty<Self, [String]>("Flags", "as", decode: Decode.strings)
  public static let handle = ProxyProperty<Self, UInt16>("Handle", "q", decode: Decode.uint16)

  public static let propertyTable: [PropertyRow] = [
    uuid.row, characteristic.row, value.row, flags.row, handle.row,
  ]

  /// Reads the value.
  /// The corresponding D-Bus member is `org.bluez.GattDescriptor1.ReadValue`.
  public func readValue(offset: UInt16 = 0) async throws(BlueZError) -> [UInt8] {
    var options: [String: DBusValue] = [:]
    if offset != 0 { options["offset"] = .uint16(offset) }
    let reply = try await call(
      "ReadValue", [.dictionaryOfVariants(options)], timeout: BlueZ.gattCallTimeout)
    guard let bytes = reply.first?.bytesValue else {
      throw BlueZError(.unexpectedValue, "ReadValue on \(path) did not return bytes")
    }
    return bytes
  }

  /// Writes the value.
  /// The corresponding D-Bus member is `org.bluez.GattDescriptor1.WriteValue`.
  public func writeValue(_ value: [UInt8], offset: UInt16 = 0) async throws(BlueZError) {
    var options: [String: DBusValue] = [:]
    if offset != 0 { options["offset"] = .uint16(offset) }
    _ = try await call(
      "WriteValue", [.bytes(value), .dictionaryOfVariants(options)],
      timeout: BlueZ.gattCallTimeout)
  }
}
