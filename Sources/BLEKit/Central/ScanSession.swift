// One discovery session: turns the object tree's changes into discoveries, right where
// bluetoothd's signals are read, and stops discovery at the end.
import BlueZ
import DBus
import Synchronization

/// Where a scan session reports: each discovery, and once, its end. `yield` is called with the
/// session locked, so it must not call back into the session; `end` is called without the lock.
struct ScanSink: Sendable {
  let yield: @Sendable (Discovery) -> Void
  let end: @Sendable (ScanEnd) -> Void
}

/// How a scan session ended.
enum ScanEnd: Sendable {
  /// A power-off, a removed adapter, bluetoothd gone, the system bus gone.
  case failed(any Error)
  /// The central closed (its object tree stopped).
  case closed

  var error: (any Error)? {
    if case .failed(let error) = self { return error }
    return nil
  }
}

/// The properties whose change means a new advertisement was heard.
private let advertisingProperties: Set<String> = [
  Device1.rssi.name, Device1.manufacturerData.name, Device1.serviceData.name,
  Device1.uuids.name, Device1.name.name, Device1.txPower.name, Device1.alias.name,
]

/// A running discovery session of a ``CentralManager``.
///
/// Its observer runs on the D-Bus connection's queue as each signal is applied to the object
/// tree: it filters, and hands a discovery to the sink at once. Until ``started()`` the
/// discoveries (and an end) are held back; ``cancel()`` silences it; ``stop()`` also stops
/// the adapter's discovery and frees the manager for the next scan.
final class ScanSession: Sendable {
  private struct State {
    var filter: DiscoveryFilterState
    /// Discoveries held until the start succeeds; `nil` once started.
    var held: [Discovery]? = []
    /// Why the session ended, once it has (held back like discoveries before the start).
    var ending: ScanEnd?
    var cancelled = false
    var restarter: Task<Void, Never>?
  }

  let manager: CentralManager
  let adapter: Adapter1
  let adapterName: String
  let options: ScanOptions
  private let sink: ScanSink
  private let state: Mutex<State>
  private let observation = Mutex<BlueZObjectObservation?>(nil)
  /// The tree observed (a passive session reads a found device's properties from it).
  private let tree = Mutex<BlueZObjectTree?>(nil)
  /// A passive session's advertisement monitor.
  private let monitor = MonitorLink()

  /// A session; it holds back what it finds until ``started()``.
  init(
    manager: CentralManager, adapter: Adapter1, adapterName: String, options: ScanOptions,
    sink: ScanSink
  ) {
    self.manager = manager
    self.adapter = adapter
    self.adapterName = adapterName
    self.options = options
    self.sink = sink
    state = Mutex(State(filter: DiscoveryFilterState(options: options, adapter: adapter.path)))
    if options.mode.isPassive { state.withLock { $0.filter.monitored = [] } }
  }

  /// Starts observing `tree`; peripherals it already knows are reported first, if asked.
  func observe(_ tree: BlueZObjectTree) {
    self.tree.withLock { $0 = tree }
    let observation = tree.observe(
      { [weak self] event in self?.handle(event) },
      startingWith: { [self] objects, _ in
        guard options.includeKnownPeripherals else { return }
        for path in objects.keys.sorted() {
          guard let properties = objects[path]?[Device1.interface] else { continue }
          report(path) { DeviceAdvertisement(properties) }
        }
      },
      devices: devicesHandler)
    observation.onEnd { [weak self] in self?.finish(.closed) }
    self.observation.withLock { $0 = observation }
  }

  /// Starts the periodic restart, if asked (before the discovery starts: the task and its
  /// timer are set up while nothing is being reported yet, and a fresh process pays for that
  /// code then, not in the moments after the start). A restart falls due every
  /// `restartInterval` and is skipped until ``started()``.
  func prepareRestarts() {
    guard let interval = options.restartInterval else { return }
    let restarter = Task { [weak self, adapter, options] in
      var due = ContinuousClock.now + interval
      while !Task.isCancelled {
        try? await Task.sleep(until: due)
        if Task.isCancelled { return }
        due = .now + interval
        guard let started = self?.isStarted else { return }
        guard started else { continue }
        // bluetoothd drops a client's filter with its session: set it again each time.
        try? await adapter.stopDiscovery()
        try? await adapter.setDiscoveryFilter(options.discoveryFilter)
        try? await adapter.startDiscovery()
      }
    }
    state.withLock { $0.restarter = restarter }
  }

  /// Whether ``started()`` was called.
  private var isStarted: Bool { state.withLock { $0.held == nil } }

  /// Discovery runs: hands over what was held back.
  func started() {
    // Handed over under the lock, so a discovery reported meanwhile cannot overtake them.
    let ending = state.withLock { state in
      for discovery in state.held ?? [] { sink.yield(discovery) }
      state.held = nil
      return state.ending
    }
    if let ending { sink.end(ending) }
  }

  /// Stops reporting and restarting (at once; never waits).
  func cancel() {
    let restarter = state.withLock { state in
      state.cancelled = true
      return state.restarter
    }
    restarter?.cancel()
    observation.withLock { $0?.cancel() }
  }

  /// Stops reporting, stops this client's discovery session, and lets the manager scan again.
  /// Runs to the end even when the calling task is cancelled (a stop usually comes from one).
  func stop() async {
    cancel()
    let restarter = state.withLock { state in
      defer { state.restarter = nil }
      return state.restarter
    }
    restarter?.cancel()
    // A task of its own: a cancelled caller's StopDiscovery call would be cancelled before
    // it is sent.
    let passive = options.mode.isPassive
    await Task { [adapter, manager, monitor] in
      await restarter?.value
      if passive {
        await monitor.take()?.unregister()
      } else {
        try? await adapter.stopDiscovery()
      }
      await manager.scanEnded()
    }.value
  }

  // MARK: Passive sessions

  /// Keeps the registered monitor, to unregister it at the stop.
  func holdMonitor(_ registration: AdvertisementMonitorRegistration) {
    monitor.hold(registration)
  }

  /// How many monitors bluetoothd must activate before the session counts as started.
  func expectMonitors(_ count: Int) {
    monitor.expect(count)
  }

  /// Unregisters the monitor now (a start that failed).
  func releaseMonitor() async {
    await monitor.take()?.unregister()
  }

  /// Whether bluetoothd activated the monitor within `limit`.
  func waitForActivation(within limit: Duration) async -> Bool {
    await monitor.waitForActivation(within: limit)
  }

  /// bluetoothd's call to the monitor: a found device is reported (with the properties the
  /// tree holds; if its object is not there yet, it is reported when it arrives); a lost one
  /// is reported again when found again.
  func monitorEvent(_ event: AdvertisementMonitorEvent) {
    switch event {
    case .activated: monitor.settle(true)
    case .released: monitor.settle(false)
    case .deviceFound(let path):
      state.withLock { _ = $0.filter.monitored?.insert(path) }
      let properties = tree.withLock { $0?.objects[path]?[Device1.interface] }
      if let properties { report(path) { DeviceAdvertisement(properties) } }
    case .deviceLost(let path):
      state.withLock { state in
        state.filter.monitored?.remove(path)
        state.filter.forget(path)
      }
    }
  }

  // MARK: On the D-Bus queue

  /// A change of the tree. (New devices come to ``device(_:_:)`` instead.)
  func handle(_ event: BlueZObjectEvent) {
    switch event {
    case .interfacesAdded:
      break
    case .propertiesChanged(let path, let interface, let changed, _, let current):
      if interface == Device1.interface, !advertisingProperties.isDisjoint(with: changed.keys) {
        report(path) { DeviceAdvertisement(current) }
      } else if path == adapter.path, interface == Adapter1.interface,
        current[Adapter1.powered.name]?.boolValue == false
      {
        finish(.failed(BluetoothError(.poweredOff, "adapter \(adapterName) was powered off")))
      }
    case .interfacesRemoved(let path, let names):
      if path == adapter.path, names.contains(Adapter1.interface) {
        finish(.failed(BluetoothError(.adapterNotFound, "adapter \(adapterName) was removed")))
      } else if names.contains(Device1.interface) {
        state.withLock { $0.filter.forget(path) }
      }
    case .serviceStopped:
      finish(.failed(BluetoothError(.serviceUnavailable, "bluetoothd stopped during the scan")))
    case .connectionLost(let message):
      // Before the tree ends the observation (which would read as the central closing).
      finish(.failed(BluetoothError(.busLost, message)))
    case .serviceStarted, .accessDenied:
      break
    }
  }

  /// What the tree calls with each new device (``device(_:_:)``, the session held weakly).
  var devicesHandler: @Sendable (ObjectPath, DeviceAdvertisement?) -> Void {
    { [weak self] path, advertisement in self?.device(path, advertisement) }
  }

  /// A new device, as the tree holds it (see
  /// `BlueZObjectTree.observe(_:startingWith:devices:)`).
  func device(_ path: ObjectPath, _ advertisement: DeviceAdvertisement?) {
    report(path) { advertisement }
  }

  /// Filters one device state and reports it (or holds it back before the start).
  /// `advertisement` is decoded only when the path may be reported.
  private func report(_ path: ObjectPath, _ advertisement: () -> DeviceAdvertisement?) {
    state.withLock { state in
      guard !state.cancelled, state.ending == nil,
        let discovery = state.filter.consider(path, advertisement)
      else { return }
      if state.held != nil {
        state.held!.append(discovery)
      } else {
        sink.yield(discovery)
      }
    }
  }

  /// Ends the session once: reports the end (or holds it until the start).
  private func finish(_ ending: ScanEnd) {
    let report = state.withLock { state in
      guard !state.cancelled, state.ending == nil else { return false }
      state.ending = ending
      return state.held == nil
    }
    if report { sink.end(ending) }
  }
}
