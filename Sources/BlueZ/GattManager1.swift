// Proxy for org.bluez.GattManager1: registers and unregisters local GATT applications.
import DBus

/// An adapter's GATT manager (`org.bluez.GattManager1` at `/org/bluez/hciN`).
public struct GattManager1: Sendable {
  /// The D-Bus interface this proxy calls.
  public static let interface = BlueZ.Interface.gattManager

  public let connection: DBusConnection
  /// The adapter's object path, e.g. `/org/bluez/hci1`.
  public let path: ObjectPath

  public init(connection: DBusConnection, adapter path: ObjectPath) {
    self.connection = connection
    self.path = path
  }

  /// Asks bluetoothd to publish the application whose ObjectManager is at `application`.
  ///
  /// bluetoothd calls back `GetManagedObjects` on that path before it answers, so the objects
  /// must be exported first. The corresponding D-Bus member is
  /// `org.bluez.GattManager1.RegisterApplication`.
  public func registerApplication(
    _ application: ObjectPath, options: [String: DBusValue] = [:]
  ) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "RegisterApplication",
        arguments: [.objectPath(application), .dictionaryOfVariants(options)])
    } catch {
      throw BlueZError(error)
    }
  }

  /// Withdraws an application registered from this connection. The corresponding D-Bus member
  /// is `org.bluez.GattManager1.UnregisterApplication`.
  public func unregisterApplication(_ application: ObjectPath) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "UnregisterApplication", arguments: [.objectPath(application)])
    } catch {
      throw BlueZError(error)
    }
  }
}
