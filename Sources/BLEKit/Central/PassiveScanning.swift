// Passive scanning: an advertisement monitor registered with bluetoothd
// (AdvertisementMonitorManager1) instead of a discovery session.
import BlueZ
import DBus
import Synchronization

extension BluetoothError.Code {
  /// A passive scan was asked for, but bluetoothd offers no advertisement monitor on the
  /// adapter (`org.bluez.AdvertisementMonitorManager1` is experimental in BlueZ 5.66: start
  /// bluetoothd with `--experimental`), or it refused or never activated the monitor.
  public static let passiveScanUnavailable = Self(rawValue: "passiveScanUnavailable")
}

/// Numbers the monitor roots this process registers (one per passive scan session).
private let nextMonitorRoot = Atomic(0)

extension CentralManager {
  /// How long bluetoothd gets to call the new monitor's `Activate` (or `Release`): BlueZ 5.66
  /// answers `RegisterMonitor` before it has read the monitor objects and added the patterns
  /// to the kernel, and activates the monitor after that.
  static let monitorActivationLimit: Duration = .seconds(10)

  /// Starts a passive scan session: registers an advertisement monitor derived from
  /// `options` and reports the devices it finds. Never falls back to active discovery.
  func startPassiveScan(_ options: ScanOptions, sink: ScanSink) async throws(BluetoothError)
    -> ScanSession
  {
    let adapter = try await adapter()
    guard objects.objects[adapter.path]?[AdvertisementMonitorManager1.interface] != nil else {
      throw BluetoothError(
        .passiveScanUnavailable,
        "passive scanning needs bluetoothd's experimental interfaces: adapter \(adapterName) "
          + "has no \(AdvertisementMonitorManager1.interface) (start bluetoothd with "
          + "--experimental)")
    }
    guard claimScanSlot() else {
      throw BluetoothError(.scanInProgress, "a scan is already running on this central")
    }
    let session = ScanSession(
      manager: self, adapter: adapter, adapterName: adapterName, options: options, sink: sink)
    session.observe(objects)
    let connection = objects.connection
    let manager = AdvertisementMonitorManager1(connection: connection, adapter: adapter.path)
    let number = nextMonitorRoot.add(1, ordering: .relaxed).oldValue
    let root = ObjectPath.monitorRoot.appending("scan\(number)")
    do throws(BluetoothError) {
      // bluetoothd's name as the manager's tree follows it.
      let callerCheck = BluetoothdCallerCheck(following: objects)
      let features =
        objects.objects[adapter.path]?[AdvertisementMonitorManager1.interface]?[
          "SupportedFeatures"]?.stringArrayValue ?? []
      let monitors = options.advertisementMonitors(
        matchedByBluetoothd: !features.contains("controller-patterns"))
      // Before registering: bluetoothd may call Activate before RegisterMonitor's reply.
      session.expectMonitors(monitors.count)
      let registration: AdvertisementMonitorRegistration
      do {
        registration = try await manager.register(
          monitors, at: root, callerCheck: callerCheck,
          events: { [weak session] event in session?.monitorEvent(event) })
      } catch {
        throw BluetoothError(error, while: "registering an advertisement monitor on \(adapterName)")
      }
      session.holdMonitor(registration)
      guard await session.waitForActivation(within: Self.monitorActivationLimit) else {
        throw BluetoothError(
          .passiveScanUnavailable,
          "bluetoothd did not activate the advertisement monitor on \(adapterName) (see its log)")
      }
    } catch {
      session.cancel()
      await session.releaseMonitor()
      freeScanSlot()
      throw error
    }
    session.started()
    return session
  }
}

extension ObjectPath {
  /// Where a central's advertisement monitors are exported.
  static let monitorRoot: ObjectPath = "/org/blekit/monitor"
}

/// A passive session's monitors: their registration, and whether bluetoothd activated them.
final class MonitorLink: Sendable {
  private struct State {
    var registration: AdvertisementMonitorRegistration?
    /// `true` once all are activated, `false` if one was released first, `nil` until then.
    var activated: Bool?
    /// Monitors registered, and activated so far.
    var expected = 1
    var activations = 0
    var waiter: CheckedContinuation<Bool, Never>?
  }
  private let state = Mutex(State())

  /// How many `Activate` calls make the monitors active.
  func expect(_ count: Int) {
    state.withLock { $0.expected = count }
  }

  func hold(_ registration: AdvertisementMonitorRegistration) {
    state.withLock { $0.registration = registration }
  }

  /// Takes the registration (once), to unregister it.
  func take() -> AdvertisementMonitorRegistration? {
    state.withLock { state in
      defer { state.registration = nil }
      return state.registration
    }
  }

  /// bluetoothd's `Activate` (`true`) or a `Release` before it (`false`). Later ones change
  /// nothing: a release after the activation comes with the adapter's or bluetoothd's end,
  /// which the object tree reports.
  func settle(_ activated: Bool) {
    let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
      guard state.activated == nil else { return nil }
      if activated {
        state.activations += 1
        guard state.activations >= state.expected else { return nil }
      }
      state.activated = activated
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: activated)
  }

  /// Whether the monitor was activated within `limit` (false if released or not in time).
  func waitForActivation(within limit: Duration) async -> Bool {
    let timer = Task { [weak self] in
      try? await Task.sleep(for: limit)
      self?.settle(false)
    }
    defer { timer.cancel() }
    return await withCheckedContinuation { continuation in
      let settled = state.withLock { state -> Bool? in
        if let activated = state.activated { return activated }
        state.waiter = continuation
        return nil
      }
      if let settled { continuation.resume(returning: settled) }
    }
  }
}
