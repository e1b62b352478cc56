// CentralManager: the central role over BlueZ: adapter choice, state, connecting.
import BlueZ
import Bluetooth
import DBus

/// The central role, in CoreBluetooth's shape (`CBCentralManager`), over bluetoothd.
///
/// Open one with ``open(adapter:)``; read ``state`` or follow ``stateUpdates()``;
/// ``scan(_:onInterruption:)`` for peripherals; ``connect(to:timeout:retry:)`` to one and get a
/// ``Peripheral``. Everything bluetoothd exports is mirrored in a cache kept current from its
/// signals, so reads of properties never go to the bus.
// An actor, where PeripheralManager is a class with a Mutex: the central's state (adapters,
// CentralState, whether a scan runs, state watchers) changes only as one task consumes the
// object tree's events and in the public async calls (scan, connect, pair), which must read the
// state and claim it (a scan's slot) in one step. Nothing here is called synchronously from the
// D-Bus queue: a scan's discoveries bypass the actor (ScanSession hands them over on the queue).
public actor CentralManager {
  /// The cache of bluetoothd's objects this manager reads from.
  package nonisolated let objects: BlueZObjectTree
  /// The adapter name asked for (`hci1`), or `nil` for the default.
  public nonisolated let requestedAdapter: String?

  /// The current state of bluetoothd and the adapter.
  public private(set) var state: CentralState = .serviceUnavailable
  /// The adapter in use, e.g. `/org/bluez/hci0`; `nil` while there is none.
  package private(set) var adapterPath: ObjectPath?

  private var serviceRunning = false
  private var accessDenied = false
  /// Set once the connection to the system bus is lost: nothing works any more.
  private var busLostMessage: String?
  private var adapters: [ObjectPath: [String: DBusValue]] = [:]
  private var watchers: [Int: AsyncStream<CentralState>.Continuation] = [:]
  private var nextWatcher = 0
  private var monitor: Task<Void, Never>?
  /// Whether a scan of this manager holds the adapter's discovery (one at a time).
  private(set) var isScanning = false
  /// Who waits for ``isScanning`` to fall (see ``scanSlotFrees(within:)``).
  private var scanSlotWatchers: [Int: AsyncStream<Void>.Continuation] = [:]
  /// Whether the manager opened the connection (so ``close()`` closes it).
  private let ownsConnection: Bool

  private init(objects: BlueZObjectTree, requestedAdapter: String?, ownsConnection: Bool) {
    self.objects = objects
    self.requestedAdapter = requestedAdapter
    self.ownsConnection = ownsConnection
  }

  /// Opens the central on `adapter` (e.g. `hci1`; `nil` picks `hci0`, else the first adapter).
  ///
  /// Succeeds whenever the system bus is reachable, even if bluetoothd is not running: then
  /// ``state`` says so and follows it when it starts. The manager opens its own connection to
  /// the system bus, which ``close()`` closes.
  /// - Throws: ``BluetoothError/Code/adapterNotFound`` when bluetoothd runs and has no adapter of
  ///   that name; ``BluetoothError/Code/serviceUnavailable`` when the system bus is unreachable.
  public static func open(adapter: String? = nil) async throws(BluetoothError) -> CentralManager {
    try await open(adapter: adapter, connecting: DBusConnection.system)
  }

  /// Opens the central on a connection the caller owns (tests' private buses); ``close()``
  /// leaves it open.
  package static func open(
    adapter: String? = nil, connection: DBusConnection
  ) async throws(BluetoothError) -> CentralManager {
    try await open(adapter: adapter, on: connection, owned: false)
  }

  /// Opens the central on a connection of its own, made by `connect` (the system bus's, or in
  /// tests a private bus's), which ``close()`` closes.
  static func open(
    adapter: String?, connecting connect: () throws(DBusError) -> DBusConnection
  ) async throws(BluetoothError) -> CentralManager {
    let bus: DBusConnection
    do throws(DBusError) {
      bus = try connect()
    } catch {
      throw BluetoothError(
        .serviceUnavailable, "cannot connect to the system bus: \(error)")
    }
    return try await open(adapter: adapter, on: bus, owned: true)
  }

  private static func open(adapter: String?, on bus: DBusConnection, owned: Bool)
    async throws(BluetoothError) -> CentralManager
  {
    let tree: BlueZObjectTree
    do throws(BlueZError) {
      tree = try await BlueZObjectTree.start(connection: bus)
    } catch {
      if owned { bus.close() }
      throw BluetoothError(error, while: "reading bluetoothd's objects")
    }
    let manager = CentralManager(objects: tree, requestedAdapter: adapter, ownsConnection: owned)
    do throws(BluetoothError) {
      try await manager.startMonitoring()
    } catch {
      await manager.close()
      throw error
    }
    return manager
  }

  private func startMonitoring() async throws(BluetoothError) {
    // Only what the state depends on: a scan's device reports do not wake this task.
    let (snapshot, running, events) = objects.subscribe(where: {
      // A closure, not the key path: a key path applied as a function is slow, and this runs
      // for each of bluetoothd's signals (each scan report).
      $0.concernsCentralState
    })
    serviceRunning = running
    accessDenied = objects.accessDeniedMessage != nil
    busLostMessage = objects.connectionLostMessage
    for (path, interfaces) in snapshot {
      if let properties = interfaces[Adapter1.interface] { adapters[path] = properties }
    }
    update()
    if serviceRunning, let requestedAdapter, adapterPath == nil {
      let known = adapters.keys.map { $0.lastComponent }
      let list = known.isEmpty ? "none" : known.sorted().joined(separator: ", ")
      throw BluetoothError(
        .adapterNotFound, "no Bluetooth adapter named \(requestedAdapter) (adapters: \(list))")
    }
    monitor = Task { [weak self] in
      for await event in events {
        guard let self else { return }
        await self.handle(event)
      }
    }
  }

  /// The executor of the D-Bus connection's queue, where bluetoothd's signals are read and a
  /// scan's discoveries are produced. Iterating a scan under
  /// `withTaskExecutorPreference(manager.executor)` resumes the loop on that queue without
  /// waking another thread; the loop's body should then be quick (printing a line is).
  package nonisolated var executor: any TaskExecutor { objects.connection.executor }

  /// Stops following bluetoothd; scans and subscriptions made by this manager end, and the
  /// connection it opened (not one a test gave it) is closed.
  public func close() async {
    monitor?.cancel()
    monitor = nil
    for watcher in watchers.values { watcher.finish() }
    watchers.removeAll()
    objects.stop()
    if ownsConnection { objects.connection.close() }
  }

  private func handle(_ event: BlueZObjectEvent) {
    switch event {
    case .interfacesAdded(let path, let interfaces):
      if let properties = interfaces[Adapter1.interface] { adapters[path] = properties }
    case .interfacesRemoved(let path, let names):
      if names.contains(Adapter1.interface) { adapters[path] = nil }
    case .propertiesChanged(let path, let interface, _, _, let current):
      if interface == Adapter1.interface { adapters[path] = current }
    case .serviceStarted:
      serviceRunning = true
      accessDenied = false
    case .serviceStopped:
      serviceRunning = false
    case .accessDenied:
      accessDenied = true
    case .connectionLost(let message):
      serviceRunning = false
      busLostMessage = message
    }
    update()
    if busLostMessage != nil {
      // No state changes any more: waiting for one would be waiting forever.
      for watcher in watchers.values { watcher.finish() }
      watchers.removeAll()
    }
  }

  private func update() {
    adapterPath = Self.chooseAdapter(requestedAdapter, among: Array(adapters.keys))
    let newState: CentralState
    if accessDenied {
      newState = .unauthorized
    } else if !serviceRunning {
      newState = .serviceUnavailable
    } else if let adapterPath, let properties = adapters[adapterPath] {
      newState =
        Adapter1.powered.decode(properties["Powered"] ?? .bool(false)) == true
        ? .poweredOn : .poweredOff
    } else {
      newState = .unsupported
    }
    guard newState != state else { return }
    state = newState
    for watcher in watchers.values { watcher.yield(newState) }
  }

  /// The adapter to use: the one named, else `hci0`, else the first by path.
  static func chooseAdapter(_ name: String?, among paths: [ObjectPath]) -> ObjectPath? {
    let names = Dictionary(
      paths.map { ($0.lastComponent, $0) },
      uniquingKeysWith: { first, _ in first })
    if let name { return names[name] }
    return names[BlueZ.defaultAdapter] ?? paths.sorted().first
  }

  /// The current state first, then every change, as CoreBluetooth's
  /// `centralManagerDidUpdateState`. The stream ends when the manager closes or the connection
  /// to the system bus is lost.
  public func stateUpdates() -> AsyncStream<CentralState> {
    let id = nextWatcher
    nextWatcher += 1
    // A watcher that falls behind needs only the recent states, the last one above all.
    let (stream, continuation) = AsyncStream.makeStream(
      of: CentralState.self, bufferingPolicy: .bufferingNewest(16))
    continuation.yield(state)
    if busLostMessage != nil {
      continuation.finish()
      return stream
    }
    continuation.onTermination = { [weak self] _ in
      Task { await self?.removeWatcher(id) }
    }
    watchers[id] = continuation
    return stream
  }

  private func removeWatcher(_ id: Int) { watchers[id] = nil }

  /// Takes the one scan slot; false when a scan holds it.
  func claimScanSlot() -> Bool {
    guard !isScanning else { return false }
    isScanning = true
    return true
  }

  /// Frees the scan slot (a scan ended, or its start failed) and wakes who waits for it.
  func freeScanSlot() {
    isScanning = false
    for watcher in scanSlotWatchers.values { watcher.yield() }
  }

  /// Waits until no scan holds the slot, at most `limit`; whether it is free. A scan's stop
  /// ends with a StopDiscovery round trip, so the slot frees a moment after the stream ends.
  func scanSlotFrees(within limit: Duration) async -> Bool {
    if !isScanning { return true }
    let id = nextWatcher
    nextWatcher += 1
    let (freed, watcher) = AsyncStream.makeStream(
      of: Void.self, bufferingPolicy: .bufferingNewest(1))
    scanSlotWatchers[id] = watcher
    _ = await firstMatch(in: freed, within: limit) { _ in true }
    scanSlotWatchers[id] = nil
    return !isScanning
  }

  /// Throws the error that explains why the central cannot work, unless it is powered on.
  public func requirePoweredOn() throws(BluetoothError) {
    if let busLostMessage { throw BluetoothError(.busLost, busLostMessage) }
    switch state {
    case .poweredOn: return
    case .poweredOff:
      throw BluetoothError(.poweredOff, "Bluetooth adapter \(adapterName) is powered off")
    case .unauthorized:
      throw BluetoothError(.unauthorized, "the system bus does not allow talking to bluetoothd")
    case .unsupported:
      throw BluetoothError(
        .adapterNotFound,
        requestedAdapter.map { "no Bluetooth adapter named \($0)" } ?? "no Bluetooth adapter")
    case .serviceUnavailable:
      throw BluetoothError(
        .serviceUnavailable, "bluetoothd is not running (org.bluez is not on the system bus)")
    }
  }

  /// Waits until the state is ``CentralState/poweredOn`` or `timeout` passes.
  /// - Throws: the error of ``requirePoweredOn()`` for the state at the deadline.
  public func waitUntilPoweredOn(timeout: Duration) async throws(BluetoothError) {
    _ = await becomes([.poweredOn], within: timeout)
    try requirePoweredOn()
  }

  /// Waits up to `limit` for the state to be one of `wanted`; whether it is at the end.
  func becomes(_ wanted: Set<CentralState>, within limit: Duration) async -> Bool {
    if wanted.contains(state) { return true }
    _ = await firstMatch(in: stateUpdates(), within: limit) { wanted.contains($0) ? true : nil }
    return wanted.contains(state)
  }

  /// The adapter's short name (`hci0`), or the requested one while there is none.
  public var adapterName: String {
    adapterPath.map { $0.lastComponent }
      ?? requestedAdapter ?? BlueZ.defaultAdapter
  }

  /// A proxy for the adapter in use.
  func adapter() async throws(BluetoothError) -> Adapter1 {
    try requirePoweredOn()
    guard let adapterPath else {
      throw BluetoothError(.adapterNotFound, "no Bluetooth adapter")
    }
    do {
      guard let adapter = try objects.proxy(Adapter1.self, at: adapterPath) else {
        throw BluetoothError(.adapterNotFound, "adapter \(adapterName) disappeared")
      }
      return adapter
    } catch let error as BluetoothError {
      throw error
    } catch {
      throw BluetoothError(.bluez, "reading adapter \(adapterName): \(error)")
    }
  }

  /// Removes the devices bluetoothd keeps in its cache on this adapter that are not connected,
  /// paired, bonded or trusted (`Adapter1.RemoveDevice`), and returns how many went.
  ///
  /// Why: once bluetoothd has resolved a device's GATT services it stops taking service UUIDs
  /// from its advertisements (BlueZ 5.66 `device_add_eir_uuids`), so `Device1.UUIDs` keeps the
  /// services of the last connection. A peer that re-registers its service under the same
  /// address then never matches a client-side service filter until bluetoothd forgets the
  /// device. Removing such temporary entries loses nothing: bluetoothd would drop them itself.
  /// The running bluetoothd's settings that matter to a client (its `[GATT] Channels`), or
  /// `nil` when they cannot be read.
  func bluetoothdConfiguration() async -> BluetoothdConfiguration? {
    await BluetoothdConfiguration.read(on: objects.connection)
  }

  @discardableResult
  public func removeCachedPeripherals() async -> Int {
    guard let adapter = try? await adapter() else { return 0 }
    var removed = 0
    for device in objects.proxies(Device1.self, under: adapter.path) {
      guard device[Device1.adapter] == adapter.path, device[Device1.connected] != true,
        device[Device1.paired] != true, device[Device1.bonded] != true,
        device[Device1.trusted] != true
      else { continue }
      if (try? await adapter.removeDevice(device.path)) != nil { removed += 1 }
    }
    return removed
  }

  /// A known peripheral by address on this manager's adapter, if bluetoothd has it.
  public func peripheral(address: BluetoothAddress) async -> PeripheralIdentifier? {
    guard let adapterPath else { return nil }
    let path = adapterPath.appending(address.objectPathComponent)
    guard (try? objects.proxy(Device1.self, at: path)) != nil else { return nil }
    return PeripheralIdentifier(address: address, adapter: adapterPath, path: path)
  }

  /// Whether bluetoothd has a link to the peripheral right now (whoever set it up).
  public nonisolated func isConnected(_ peripheral: PeripheralIdentifier) -> Bool {
    guard let device = try? objects.proxy(Device1.self, at: peripheral.path) else { return false }
    return Peripheral.isConnected(device)
  }
}

extension BlueZObjectEvent {
  /// Whether the event can change a ``CentralState``: adapters appearing, powering on or off,
  /// or going, and bluetoothd starting, stopping or refusing us.
  var concernsCentralState: Bool {
    switch self {
    case .interfacesAdded(_, let interfaces): interfaces[Adapter1.interface] != nil
    case .interfacesRemoved(_, let names): names.contains(Adapter1.interface)
    // Only Powered: the state depends on no other property, and an adapter's other changes
    // (Discovering, at the start of each scan) would wake the manager's task for nothing.
    case .propertiesChanged(_, let interface, let changed, let invalidated, _):
      interface == Adapter1.interface
        && (changed[Adapter1.powered.name] != nil || invalidated.contains(Adapter1.powered.name))
    case .serviceStarted, .serviceStopped, .accessDenied, .connectionLost: true
    }
  }
}
