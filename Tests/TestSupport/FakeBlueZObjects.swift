// A stand-in for bluetoothd's object tree on a private bus: plain adapters and devices under
// an ObjectManager at /, owned by org.bluez.
import BlueZ
import DBus

#if canImport(Glibc)
  import Glibc
#endif

/// A fake org.bluez that exports plain objects (adapters, devices) under an ObjectManager at /.
public final class FakeBlueZObjects: Sendable {
  public let connection: DBusConnection

  public init(bus: PrivateBus) async throws {
    connection = try bus.connect()
    try connection.addObjectManager(at: "/")
    _ = try await connection.requestName(BlueZ.service)
  }

  public static func interface(_ name: InterfaceName, _ properties: [String: DBusValue])
    -> ExportedInterface
  {
    ExportedInterface(
      name: name,
      properties: properties.map { name, value in
        ExportedProperty(name: name, signature: value.signature, access: .read) { value }
      })
  }

  public func exportAdapter(_ name: String, powered: Bool) throws {
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          Adapter1.interface,
          [
            "Address": .string("00:AA:01:00:00:0\(name.last!)"), "Powered": .bool(powered),
            "Discovering": .bool(false),
          ])
      ]), at: ObjectPath("/org/bluez/\(name)"))
  }

  public func exportDevice(_ path: ObjectPath, address: String, uuids: [String]) throws {
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          Device1.interface,
          [
            "Address": .string(address), "Adapter": .objectPath("/org/bluez/hci0"),
            "Connected": .bool(false), "UUIDs": .strings(uuids), "RSSI": .int16(127),
            "ManufacturerData": .dictionary(
              key: "q", value: "v",
              [DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([2, 16, 1])))]),
          ])
      ]), at: path)
  }

  /// A device on hci0 that is connected with its services resolved, and one primary service
  /// of it (`serviceUUID`) at `service`, as bluetoothd exports them after a connection.
  public func exportConnectedDevice(
    _ path: ObjectPath, address: String, service: ObjectPath, serviceUUID: String
  ) throws {
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          Device1.interface,
          [
            "Address": .string(address), "Adapter": .objectPath("/org/bluez/hci0"),
            "Connected": .bool(true), "ServicesResolved": .bool(true),
          ])
      ]), at: path)
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          GattService1.interface,
          ["UUID": .string(serviceUUID), "Device": .objectPath(path), "Primary": .bool(true)])
      ]), at: service)
  }

  /// A connected SOCK_SEQPACKET pair, as bluetoothd makes for AcquireWrite and AcquireNotify
  /// (close-on-exec); a failure is answered as bluetoothd's `Failed`.
  public static func socketPair() throws -> (kept: Int32, handedOut: Int32) {
    var fds: [Int32] = [-1, -1]
    let kind = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    guard socketpair(AF_UNIX, kind, 0, &fds) == 0 else {
      throw DBusError.remote(name: "org.bluez.Error.Failed", message: "socketpair")
    }
    return (fds[0], fds[1])
  }

  public func close() { connection.close() }
}
