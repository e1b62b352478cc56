// SimulatedBluetooth: a stand-in for bluetoothd on a private dbus-daemon, for app tests.
import BLEKit
import DBus
import Synchronization

/// A simulated bluetoothd on a private message bus, for an app's unit tests: no root, no radio,
/// no virtual machine, only Debian's `dbus-daemon` (package `dbus-daemon`, or `dbus`).
///
/// It has one adapter, `hci0`, powered. ``centralManager()`` and ``peripheralManager()`` open
/// BLEKit's own managers on it, unchanged: the app's code runs as it would against bluetoothd.
///
/// ```swift
/// let bluetooth = try await SimulatedBluetooth.start()
/// defer { bluetooth.close() }
/// let sensor = SimulatedPeripheral(address: ..., advertisement: ..., services: [...])
/// bluetooth.add(sensor)
/// let central = try await bluetooth.centralManager()
/// // ... the app scans, connects, reads ...
/// try await sensor.waitUntilConnected()
/// ```
///
/// What it models: discovery (device objects appear while a scan runs, honouring the discovery
/// filter's service UUIDs; RSSI changes), `Device1.Connect` and `Disconnect`, the remote GATT
/// database (`ReadValue`, `WriteValue` with and without response, `StartNotify`, `StopNotify`,
/// values as `PropertiesChanged` on `Value`), the errors bluetoothd answers for ATT errors, and
/// for the peripheral role `GattManager1` and `LEAdvertisingManager1` with a
/// ``SimulatedCentral`` that reads, writes and subscribes.
///
/// What it does not model: pairing, bonding and agents; encryption (a read that needs it is
/// scripted as an ATT error); MTU exchange (characteristics report a fixed MTU);
/// `AcquireWrite` and `AcquireNotify` (answered `NotSupported`, so BLEKit takes the
/// `StartNotify` path and plain writes); L2CAP channels; advertisement monitors and passive
/// scanning; RSSI, pattern and transport fields of the discovery filter (only its UUIDs);
/// several discovery clients (the last filter set applies); bluetoothd's removal of devices
/// not heard for a while (a device stays until it vanishes or is removed); more than one
/// adapter; bluetoothd restarting.
public final class SimulatedBluetooth: Sendable {
  private let daemon: PrivateBusDaemon
  let host: SimulationHost
  /// Connections handed to managers, closed by ``close()``.
  private let connections = Mutex<[DBusConnection]>([])

  private init(daemon: PrivateBusDaemon, host: SimulationHost) {
    self.daemon = daemon
    self.host = host
  }

  /// Starts a private dbus-daemon and the simulated bluetoothd on it.
  public static func start() async throws -> SimulatedBluetooth {
    let daemon = try await PrivateBusDaemon()
    do {
      return SimulatedBluetooth(
        daemon: daemon, host: try await SimulationHost(address: daemon.address))
    } catch {
      daemon.stop()
      throw SimulationError("cannot start the simulated bluetoothd: \(error)")
    }
  }

  /// Puts `peripheral` in the simulated air: heard at once if the app scans, else from its
  /// next scan.
  public func add(_ peripheral: SimulatedPeripheral) {
    host.add(peripheral)
  }

  /// A central manager on hci0 of the simulation (``BLEKit/CentralManager`` unchanged).
  public func centralManager() async throws -> CentralManager {
    try await CentralManager.open(adapter: "hci0", connection: try newConnection())
  }

  /// A peripheral manager on hci0 of the simulation (``BLEKit/PeripheralManager`` unchanged).
  public func peripheralManager() async throws -> PeripheralManager {
    try await PeripheralManager.open(adapter: "hci0", connection: try newConnection())
  }

  /// Whether a scan runs (bluetoothd's `Adapter1.Discovering`).
  public var isDiscovering: Bool { host.isDiscovering }

  /// Returns once the app's scan has started discovery and the peripherals in range have been
  /// heard (their device objects exported).
  public func waitUntilDiscovering(timeout: Duration = .seconds(10)) async throws {
    try await host.state.wait("discovery runs", timeout: timeout) { $0.heardAll }
  }

  /// Closes every connection handed out and kills the daemon. Managers opened here stop
  /// working; close them first for a clean end.
  public func close() {
    for connection in connections.withLock({ $0 }) { connection.close() }
    host.close()
    daemon.stop()
  }

  private func newConnection() throws -> DBusConnection {
    let connection = try DBusConnection(address: daemon.address)
    connections.withLock { $0.append(connection) }
    return connection
  }
}
