// The peripheral side's state stream: its adapter powered on or off, gone, or bluetoothd gone
// (CoreBluetooth's peripheralManagerDidUpdateState).
import BlueZ
import DBus

/// The state of a ``PeripheralManager``'s adapter and of bluetoothd: the same states as a
/// central's (CoreBluetooth has one `CBManagerState` for both roles).
public typealias PeripheralManagerState = CentralState

extension PeripheralManager {
  /// The current state first, then every change, as CoreBluetooth's
  /// `peripheralManagerDidUpdateState`: ``CentralState/poweredOff`` when the adapter is
  /// switched off, ``CentralState/unsupported`` when it is removed,
  /// ``CentralState/serviceUnavailable`` while bluetoothd is not on the bus.
  ///
  /// It follows bluetoothd's objects on the manager's connection until the manager closes,
  /// the stream is dropped, or the connection to the bus is lost (the stream then ends).
  /// Only the states matter here: ``supervise(returnWithin:)`` is what registers services
  /// again after a bluetoothd restart.
  public func stateUpdates() async throws(BluetoothError) -> AsyncStream<PeripheralManagerState> {
    let tree = try follower()
    let (snapshot, running, events) = tree.subscribe(where: { $0.concernsCentralState })
    let initial = PeripheralStateTracker(
      adapter: adapterPath, powered: Self.powered(snapshot[adapterPath]?[Adapter1.interface]),
      serviceRunning: running, accessDenied: tree.accessDeniedMessage != nil)
    // The recent states suffice to a watcher that falls behind, the last one above all.
    let (stream, continuation) = AsyncStream.makeStream(
      of: PeripheralManagerState.self, bufferingPolicy: .bufferingNewest(16))
    continuation.yield(initial.state)
    let relay = Task {
      var tracker = initial
      for await event in events {
        let before = tracker.state
        if case .connectionLost = event { break }
        tracker.apply(event)
        if tracker.state != before { continuation.yield(tracker.state) }
      }
      continuation.finish()
    }
    continuation.onTermination = { _ in relay.cancel() }
    return stream
  }

  /// Whether an adapter's `Adapter1` properties say it is powered; nil when it is absent.
  static func powered(_ properties: [String: DBusValue]?) -> Bool? {
    guard let properties else { return nil }
    return Adapter1.powered.decode(properties[Adapter1.powered.name] ?? .bool(false)) == true
  }
}

/// The state of one adapter, rebuilt from bluetoothd's object events.
struct PeripheralStateTracker: Sendable {
  let adapter: ObjectPath
  /// nil when the adapter does not exist.
  var powered: Bool?
  var serviceRunning: Bool
  var accessDenied: Bool

  var state: PeripheralManagerState {
    if accessDenied { return .unauthorized }
    if !serviceRunning { return .serviceUnavailable }
    switch powered {
    case true?: return .poweredOn
    case false?: return .poweredOff
    case nil: return .unsupported
    }
  }

  mutating func apply(_ event: BlueZObjectEvent) {
    switch event {
    case .interfacesAdded(let path, let interfaces) where path == adapter:
      if let properties = interfaces[Adapter1.interface] {
        powered = PeripheralManager.powered(properties)
      }
    case .interfacesRemoved(let path, let names) where path == adapter:
      if names.contains(Adapter1.interface) { powered = nil }
    case .propertiesChanged(let path, let interface, _, _, let current)
    where path == adapter && interface == Adapter1.interface:
      powered = PeripheralManager.powered(current)
    case .serviceStarted:
      serviceRunning = true
      accessDenied = false
    case .serviceStopped, .connectionLost:
      serviceRunning = false
    case .accessDenied:
      accessDenied = true
    default:
      break
    }
  }
}
