// Proxy for org.bluez.AdvertisementMonitorManager1: registers a tree of advertisement monitors
// (passive scanning). Experimental in BlueZ 5.66: present only when bluetoothd runs with -E.
import DBus

/// An adapter's advertisement monitor manager (`org.bluez.AdvertisementMonitorManager1` at
/// `/org/bluez/hciN`, BlueZ's `doc/org.bluez.AdvertisementMonitorManager.rst`).
///
/// bluetoothd lists this interface on an adapter only when its experimental interfaces are
/// enabled (`bluetoothd --experimental`, up to at least BlueZ 5.66).
public struct AdvertisementMonitorManager1: Sendable {
  /// The D-Bus interface this proxy calls.
  public static let interface: InterfaceName = "org.bluez.AdvertisementMonitorManager1"

  public let connection: DBusConnection
  /// The adapter's object path, e.g. `/org/bluez/hci0`.
  public let path: ObjectPath

  public init(connection: DBusConnection, adapter path: ObjectPath) {
    self.connection = connection
    self.path = path
  }

  /// What the manager reports (both read-only).
  public struct Properties: Sendable, Hashable {
    /// Monitor types bluetoothd takes (`SupportedMonitorTypes`), e.g. `or_patterns`.
    public var supportedMonitorTypes: [String]
    /// Features (`SupportedFeatures`), e.g. `controller-patterns` when the controller itself
    /// filters by pattern.
    public var supportedFeatures: [String]
  }

  /// Reads both properties (`org.freedesktop.DBus.Properties.GetAll`).
  public func properties() async throws(BlueZError) -> Properties {
    let all = try await allProperties(of: Self.interface, at: path, on: connection)
    return Properties(
      supportedMonitorTypes: all["SupportedMonitorTypes"]?.stringArrayValue ?? [],
      supportedFeatures: all["SupportedFeatures"]?.stringArrayValue ?? [])
  }

  /// Registers the monitors exported under `root` (an ObjectManager there); bluetoothd reads
  /// them with `GetManagedObjects` before answering. The corresponding D-Bus member is
  /// `org.bluez.AdvertisementMonitorManager1.RegisterMonitor`.
  public func registerMonitor(_ root: ObjectPath) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "RegisterMonitor", arguments: [.objectPath(root)])
    } catch {
      throw BlueZError(error)
    }
  }

  /// Unregisters the monitors under `root`. The corresponding D-Bus member is
  /// `org.bluez.AdvertisementMonitorManager1.UnregisterMonitor`.
  public func unregisterMonitor(_ root: ObjectPath) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "UnregisterMonitor", arguments: [.objectPath(root)])
    } catch {
      throw BlueZError(error)
    }
  }
}
