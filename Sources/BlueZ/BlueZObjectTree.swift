// BlueZObjectTree: a live cache of bluetoothd's objects, kept current from ObjectManager signals.
import DBus
import Synchronization

/// What bluetoothd currently exports: interfaces and their properties, per object path.
public typealias BlueZObjects = [ObjectPath: [InterfaceName: [String: DBusValue]]]

/// A change to the cached tree, delivered in the order bluetoothd reported it.
public enum BlueZObjectEvent: Sendable {
  /// An object gained interfaces (with their full properties).
  case interfacesAdded(ObjectPath, [InterfaceName: [String: DBusValue]])
  /// An object lost interfaces; an object with no interface left is gone.
  case interfacesRemoved(ObjectPath, [InterfaceName])
  /// Properties of one interface changed; `current` is the interface's merged properties after
  /// the change.
  case propertiesChanged(
    ObjectPath, InterfaceName, changed: [String: DBusValue], invalidated: [String],
    current: [String: DBusValue])
  /// bluetoothd (re)appeared on the bus and the tree holds all of its objects (each was first
  /// reported with ``interfacesAdded(_:_:)``).
  case serviceStarted
  /// bluetoothd left the bus; every object was first reported removed.
  case serviceStopped
  /// The bus refused us (e.g. `AccessDenied` on GetManagedObjects); the tree stays empty.
  case accessDenied(String)
  /// The connection to the bus was lost (the bus daemon stopped or restarted): the tree is
  /// empty and has stopped (nothing is reported removed first), and this is the last event
  /// every observer hears before its observation ends.
  case connectionLost(String)
}

/// A cache of BlueZ's objects fed by `org.freedesktop.DBus.ObjectManager`, and the one follower
/// of bluetoothd on its connection: who owns `org.bluez` (``owner``, which a
/// ``BluetoothdCallerCheck`` reads), whether it runs, and what it exports.
///
/// On ``start(connection:)`` it subscribes to every signal sent by `org.bluez` and to
/// NameOwnerChanged for `org.bluez` *first*, then calls GetManagedObjects; signals that arrive
/// while the reply is pending are replayed on top of the snapshot, in order, so nothing that
/// happens between the two is lost. When bluetoothd leaves the bus the tree empties; when it
/// comes back the tree fetches everything again.
///
/// Signals are applied on the connection's queue as they are read, and observers
/// (``observe(_:startingWith:)``) hear of each change right there: a discovery reaches a scan
/// without waiting for a task to be scheduled. Reads (``objects``, ``proxy(_:at:)``) take a
/// lock and never wait for the bus.
public final class BlueZObjectTree: Sendable {
  /// The connection the tree listens on and proxies call through.
  public let connection: DBusConnection

  private struct Observer {
    let observation: BlueZObjectObservation
    let handler: @Sendable (BlueZObjectEvent) -> Void
    /// Takes the objects that gain `Device1` instead of `handler` (see
    /// ``observe(_:startingWith:devices:)``).
    var devices: (@Sendable (ObjectPath, DeviceAdvertisement?) -> Void)? = nil
  }

  private struct State {
    var objects: BlueZObjects = [:]
    var isServiceRunning = false
    var accessDeniedMessage: String?
    /// Signals held back while a GetManagedObjects reply is awaited.
    var pending: [ObjectManagerSignal]?
    var generation = 0
    var observers: [Observer] = []
    var subscriptions: [SignalSubscription] = []
    var stopped = false
    /// Why the tree stopped by itself: the connection to the bus was lost.
    var connectionLost: String?
    /// The unique name that owns `org.bluez`, as last heard.
    var owner: BusName?
    /// Whether a NameOwnerChanged set `owner` (it is newer than the first GetNameOwner's reply).
    var ownerHeard = false
  }

  private let state = Mutex(State())

  private init(connection: DBusConnection) {
    self.connection = connection
  }

  /// The cached objects.
  public var objects: BlueZObjects { state.withLock { $0.objects } }
  /// Whether bluetoothd owns `org.bluez` right now.
  public var isServiceRunning: Bool { state.withLock { $0.isServiceRunning } }
  /// Set when the bus refused GetManagedObjects (a policy problem, not a missing daemon).
  public var accessDeniedMessage: String? { state.withLock { $0.accessDeniedMessage } }
  /// Set when the connection to the bus was lost (see ``BlueZObjectEvent/connectionLost(_:)``):
  /// the tree has stopped.
  public var connectionLostMessage: String? { state.withLock { $0.connectionLost } }
  /// The unique bus name of the running bluetoothd (the owner of `org.bluez`), or nil while
  /// none runs and once the connection is lost. It follows `NameOwnerChanged` as the signal is
  /// read, before the new bluetoothd's objects are in (``isServiceRunning`` waits for those), so
  /// that a restarted bluetoothd may call exported objects at once. After ``stop()`` it keeps
  /// the last owner heard: an owner of the tree unregisters its objects after stopping it, and
  /// bluetoothd's calls during that (`Release`) are still admitted.
  public var owner: BusName? { state.withLock { $0.owner } }

  /// Starts a tree on `connection` and returns once its first snapshot is in (or bluetoothd is
  /// known to be absent).
  public static func start(connection: DBusConnection) async throws(BlueZError) -> BlueZObjectTree {
    let tree = BlueZObjectTree(connection: connection)
    try await tree.listen()
    return tree
  }

  private func listen() async throws(BlueZError) {
    let owner: BusName?
    do throws(DBusError) {
      // bluetoothd's signals are read straight into the tree's dictionaries (no DBusValue for
      // the whole body first): this is the path of every scan report.
      let ended: @Sendable (DBusError?) -> Void = { [weak self] error in
        // Only the loss of the connection ends a subscription with an error.
        if error != nil { self?.connectionWasLost() }
      }
      let signals = try await connection.handleSignals(
        MatchRule(sender: BlueZ.service),
        reading: { [weak self] header, reader in self?.receive(header, &reader) }, onEnd: ended)
      let owners = try await connection.handleSignals(
        .nameOwnerChanged(BlueZ.service),
        { [weak self] signal in
          guard let self, let change = NameOwnerChange(signal) else { return }
          self.ownerChanged(change.newOwner)
        }, onEnd: ended)
      state.withLock { $0.subscriptions += [signals, owners] }
      owner = try await connection.nameOwner(BlueZ.service)
    } catch {
      throw BlueZError(error)
    }
    state.withLock { state in
      // A change heard since the question is newer than (or as new as) the answer.
      if !state.ownerHeard { state.owner = owner }
    }
    if owner != nil, let generation = beginResync() { await resync(generation) }
  }

  /// The connection to the bus was lost: empties the tree, tells the observers, and stops.
  /// On the connection's queue (each subscription's end), so at most once per subscription.
  private func connectionWasLost() {
    let message = "lost the connection to the system bus"
    halt { state in
      guard !state.stopped else { return false }
      state.connectionLost = message
      state.owner = nil
      state.generation += 1
      state.objects.removeAll()
      state.isServiceRunning = false
      Self.emit(.connectionLost(message), in: &state)
      return true
    }
  }

  /// Stops listening; observers hear no more and subscribers' streams finish.
  public func stop() {
    halt { _ in true }
  }

  /// Marks the tree stopped after `last` (under the lock; `false`: it was already stopped,
  /// nothing more to do), then ends every subscription and observation, outside the lock.
  private func halt(_ last: (inout State) -> Bool) {
    let (observers, subscriptions) = state.withLock { state in
      guard last(&state) else { return ([Observer](), [SignalSubscription]()) }
      state.stopped = true
      state.pending = nil
      defer {
        state.observers.removeAll()
        state.subscriptions.removeAll()
      }
      return (state.observers, state.subscriptions)
    }
    for subscription in subscriptions { subscription.cancel() }
    for observer in observers { observer.observation.end() }
  }

  /// Calls `handler` with every later change, in order, from the moment this returns; the
  /// current objects go to `initial` first, in the same step, so no change falls between them.
  ///
  /// The handler runs where the change is applied (the connection's queue, or the task that
  /// fetched a new snapshot), one change at a time, while the tree is locked: it must return
  /// quickly and must not read the tree (the event carries what it needs). `initial` runs
  /// under the same lock, on the caller's thread. The observation lasts until it is cancelled
  /// or the tree stops.
  ///
  /// With `devices`, each ``BlueZObjectEvent/interfacesAdded(_:_:)`` that includes `Device1`
  /// goes to `devices` instead of `handler`, as the device's path and its advertisement (`nil`
  /// when its `Device1` properties lack `Address`, `Adapter` or `Connected`), once the tree
  /// holds it. That is the path of every new peripheral a scan reports.
  public func observe(
    _ handler: @escaping @Sendable (BlueZObjectEvent) -> Void,
    startingWith initial: (_ objects: BlueZObjects, _ isServiceRunning: Bool) -> Void = { _, _ in },
    devices: (@Sendable (_ path: ObjectPath, _ advertisement: DeviceAdvertisement?) -> Void)? = nil
  ) -> BlueZObjectObservation {
    let observation = BlueZObjectObservation()
    let stopped = state.withLock { state in
      guard !state.stopped else { return true }
      initial(state.objects, state.isServiceRunning)
      state.observers.append(
        Observer(observation: observation, handler: handler, devices: devices))
      return false
    }
    if stopped { observation.end() }
    return observation
  }

  /// The current objects and a stream of every later change (or only those `isWanted` lets
  /// through), taken atomically: no change falls between the snapshot and the first event.
  /// The stream buffers without bound; dropping it (or ending iteration) unsubscribes.
  ///
  /// `isWanted` runs like an observer's handler (see ``observe(_:startingWith:)``); a change it
  /// turns away costs the subscriber nothing, not even a task wake-up.
  public func subscribe(
    where isWanted: @escaping @Sendable (BlueZObjectEvent) -> Bool = { _ in true }
  ) -> (
    objects: BlueZObjects, isServiceRunning: Bool, events: AsyncStream<BlueZObjectEvent>
  ) {
    // Unbounded: a watcher rebuilds its state from these changes, so none may be lost.
    let (stream, continuation) = AsyncStream.makeStream(
      of: BlueZObjectEvent.self, bufferingPolicy: .unbounded)
    var snapshot: BlueZObjects = [:]
    var running = false
    let observation = observe(
      { event in if isWanted(event) { continuation.yield(event) } },
      startingWith: { objects, isRunning in
        snapshot = objects
        running = isRunning
      })
    observation.onEnd { continuation.finish() }
    continuation.onTermination = { _ in observation.cancel() }
    return (snapshot, running, stream)
  }

  /// Hands `event` to every live observer (dropping cancelled ones). Under the lock.
  private static func emit(_ event: BlueZObjectEvent, in state: inout State) {
    state.observers.removeAll { $0.observation.isCancelled }
    for observer in state.observers {
      if let devices = observer.devices, case .interfacesAdded(let path, let interfaces) = event,
        let device = interfaces[Device1.interface]
      {
        devices(path, DeviceAdvertisement(device))
      } else {
        observer.handler(event)
      }
    }
  }

  /// Applies `messages` (signals as bluetoothd sends them) to an empty scratch tree, not to
  /// this or any live tree, and returns the changes they make, in order, read exactly as the
  /// tree reads bluetoothd's. With `devices`, the scratch tree's observer takes new devices as
  /// ``observe(_:startingWith:devices:)`` describes (those events are then not in the result).
  /// For tests of the tree's reading.
  package static func replay(
    _ messages: [DBusMessage],
    devices: (@Sendable (_ path: ObjectPath, _ advertisement: DeviceAdvertisement?) -> Void)? = nil
  ) -> [BlueZObjectEvent] {
    let events = Mutex<[BlueZObjectEvent]>([])
    var scratch = State()
    scratch.observers.append(
      Observer(
        observation: BlueZObjectObservation(),
        handler: { event in events.withLock { $0.append(event) } }, devices: devices))
    for message in messages {
      guard let path = message.path, let interface = message.interface,
        let member = message.member
      else { continue }
      let header = SignalHeader(
        sender: message.sender, path: path, interface: interface, member: member)
      try? message.read { reader throws(DBusError) in take(header, &reader, into: &scratch) }
    }
    return events.withLock { $0 }
  }

  // MARK: Typed look-ups

  /// A typed proxy for the object at `path`, or `nil` if it lacks the interface.
  /// - Throws: ``BlueZError/Code/unexpectedValue`` when a required property is missing.
  public func proxy<P: BlueZProxy>(_ type: P.Type, at path: ObjectPath) throws(BlueZError) -> P? {
    guard let properties = state.withLock({ $0.objects[path]?[P.interface] }) else { return nil }
    return try P.make(path: path, properties: properties, connection: connection)
  }

  /// Every object with interface `P` (optionally only beneath `ancestor`), sorted by path.
  /// Objects whose required properties are missing are left out.
  public func proxies<P: BlueZProxy>(_ type: P.Type, under ancestor: ObjectPath? = nil) -> [P] {
    let objects = self.objects
    return objects.keys.sorted().compactMap { path in
      if let ancestor, !path.isDescendant(of: ancestor) { return nil }
      guard let properties = objects[path]?[P.interface] else { return nil }
      return try? P.make(path: path, properties: properties, connection: connection)
    }
  }

  // MARK: Keeping current

  /// On the connection's queue.
  private func ownerChanged(_ owner: BusName?) {
    state.withLock { state in
      guard !state.stopped else { return }
      state.owner = owner
      state.ownerHeard = true
    }
    if owner == nil {
      state.withLock { state in
        state.generation += 1
        state.pending = nil
        Self.clear(&state)
      }
    } else if let generation = beginResync() {
      Task { await self.resync(generation) }
    }
  }

  private static func clear(_ state: inout State) {
    let wasRunning = state.isServiceRunning
    for path in state.objects.keys.sorted().reversed() {
      emit(.interfacesRemoved(path, Array(state.objects[path]!.keys)), in: &state)
    }
    state.objects.removeAll()
    state.isServiceRunning = false
    if wasRunning { emit(.serviceStopped, in: &state) }
  }

  /// Starts holding signals back for a new snapshot; the snapshot's generation, or `nil` once
  /// the tree has stopped.
  private func beginResync() -> Int? {
    state.withLock { state in
      guard !state.stopped else { return nil }
      state.generation += 1
      state.pending = []
      return state.generation
    }
  }

  /// Fetches a snapshot for `generation` and applies it. When the call fails for a reason
  /// other than a refusal or the loss of the bus, it is made again from a task of its own, so
  /// that ``start(connection:)`` does not wait for it.
  private func resync(_ generation: Int) async {
    guard await fetchSnapshot(generation) == .again else { return }
    Task { [weak self] in
      var pause: Duration = .milliseconds(250)
      while true {
        try? await Task.sleep(for: pause)
        guard let self, await self.fetchSnapshot(generation) == .again else { return }
        pause = min(pause * 2, Self.longestResyncPause)
      }
    }
  }

  /// The longest pause between two attempts at a snapshot.
  static let longestResyncPause: Duration = .seconds(5)

  /// Whether a snapshot attempt is over, or must be made again.
  private enum Attempt { case done, again }

  /// One GetManagedObjects for `generation`; on success the snapshot replaces the tree.
  ///
  /// A failure other than `AccessDenied` (reported) or the loss of the bus (the tree stops) is
  /// `.again`: a call that timed out while bluetoothd was busy, or that a bluetoothd still
  /// setting up refused, would otherwise leave the tree empty while bluetoothd runs, which
  /// reads as "not running" until its next restart. Signals stay held back meanwhile and are
  /// replayed on top of the snapshot that succeeds.
  private func fetchSnapshot(_ generation: Int) async -> Attempt {
    let snapshot: BlueZObjects
    do throws(DBusError) {
      snapshot = try await Self.fetchManagedObjects(on: connection)
    } catch {
      return state.withLock { state in
        guard generation == state.generation, !state.stopped else { return .done }
        let mapped = BlueZError(error)
        if mapped.code == .accessDenied {
          state.pending = nil
          state.accessDeniedMessage = mapped.description
          Self.emit(.accessDenied(mapped.description), in: &state)
          return .done
        }
        if error.code == .disconnected {
          state.pending = nil
          return .done
        }
        return .again
      }
    }
    state.withLock { state in
      guard generation == state.generation, !state.stopped else { return }
      if !state.objects.isEmpty { Self.clear(&state) }
      state.accessDeniedMessage = nil
      state.objects = snapshot
      for path in snapshot.keys.sorted() {
        Self.emit(.interfacesAdded(path, snapshot[path]!), in: &state)
      }
      let replay = state.pending ?? []
      state.pending = nil
      for signal in replay { Self.apply(signal, to: &state) }
      state.isServiceRunning = true
      Self.emit(.serviceStarted, in: &state)
    }
    return .done
  }

  /// One of bluetoothd's signals, on the connection's queue.
  private func receive(_ header: SignalHeader, _ reader: inout MessageReader) {
    state.withLock { state in
      guard !state.stopped else { return }
      Self.take(header, &reader, into: &state)
    }
  }

  /// Reads a signal and applies it (or holds it back while a snapshot is awaited).
  private static func take(
    _ header: SignalHeader, _ reader: inout MessageReader, into state: inout State
  ) {
    guard let signal = ObjectManagerSignal(header, &reader) else { return }
    if state.pending != nil {
      state.pending!.append(signal)
    } else {
      apply(signal, to: &state)
    }
  }

  private static func apply(_ signal: ObjectManagerSignal, to state: inout State) {
    switch signal {
    case .interfacesAdded(let path, let added):
      guard !added.isEmpty else { return }
      if let known = state.objects.index(forKey: path) {
        state.objects.values[known].merge(added) { _, new in new }
      } else {
        state.objects[path] = added  // a new object (each new peripheral): nothing to merge
      }
      emit(.interfacesAdded(path, added), in: &state)
    case .interfacesRemoved(let path, let removed):
      guard var interfaces = state.objects[path] else { return }
      for name in removed { interfaces[name] = nil }
      state.objects[path] = interfaces.isEmpty ? nil : interfaces
      emit(.interfacesRemoved(path, removed), in: &state)
    case .propertiesChanged(let path, let interface, let changed, let invalidated):
      guard let object = state.objects.index(forKey: path),
        state.objects.values[object][interface] != nil
      else { return }
      // Changed in place: a copy taken out and written back would copy the whole property
      // table (an adapter's or a device's ~20 entries) at each signal.
      let properties = update(
        &state.objects.values[object][interface]!, changed: changed, invalidated: invalidated)
      emit(
        .propertiesChanged(
          path, interface, changed: changed, invalidated: invalidated, current: properties),
        in: &state)
    }
  }

  /// Applies a PropertiesChanged to `properties` and returns the result.
  private static func update(
    _ properties: inout [String: DBusValue], changed: [String: DBusValue], invalidated: [String]
  ) -> [String: DBusValue] {
    properties.merge(changed) { _, new in new }  // variants already unwrapped
    for name in invalidated { properties[name] = nil }
    return properties
  }

  /// bluetoothd's objects now, read as the tree reads them, without keeping a tree
  /// (`org.freedesktop.DBus.ObjectManager.GetManagedObjects` on `/`).
  public static func managedObjects(on connection: DBusConnection) async throws(BlueZError)
    -> BlueZObjects
  {
    do throws(DBusError) {
      return try await fetchManagedObjects(on: connection)
    } catch {
      throw BlueZError(error)
    }
  }

  private static func fetchManagedObjects(on connection: DBusConnection) async throws(DBusError)
    -> BlueZObjects
  {
    let reply = try await connection.call(
      destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.Interface.objectManager,
      member: "GetManagedObjects")
    return reply.first.map(decodeManagedObjects) ?? [:]
  }

  /// Decodes GetManagedObjects' `a{oa{sa{sv}}}`.
  package static func decodeManagedObjects(_ value: DBusValue) -> BlueZObjects {
    var result: BlueZObjects = [:]
    for entry in value.dictionaryValue ?? [] {
      guard let path = entry.key.objectPathValue else { continue }
      // A path named twice: the last entry wins, also when it holds no valid interface.
      let interfaces = decodeInterfaces(entry.value)
      result[path] = interfaces.isEmpty ? nil : interfaces
    }
    return result
  }

  /// Decodes `a{sa{sv}}` (interfaces and their properties), unwrapping the variants.
  static func decodeInterfaces(_ value: DBusValue) -> [InterfaceName: [String: DBusValue]] {
    var result: [InterfaceName: [String: DBusValue]] = [:]
    for entry in value.dictionaryValue ?? [] {
      guard let name = entry.key.stringValue.flatMap(InterfaceName.init(rawValue:)) else {
        continue
      }
      result[name] = entry.value.stringVariantDictionary ?? [:]  // variants unwrapped
    }
    return result
  }
}

/// One of bluetoothd's ObjectManager or Properties signals, as the tree applies it.
enum ObjectManagerSignal {
  case interfacesAdded(ObjectPath, [InterfaceName: [String: DBusValue]])
  case interfacesRemoved(ObjectPath, [InterfaceName])
  case propertiesChanged(
    ObjectPath, InterfaceName, changed: [String: DBusValue], invalidated: [String])

  /// Reads a received signal; `nil` for other signals and for ill-formed ones.
  init?(_ header: SignalHeader, _ reader: inout MessageReader) {
    do throws(DBusError) {
      switch (header.interface, header.member.rawValue) {
      case (BlueZ.Interface.objectManager, "InterfacesAdded"):
        let path = try reader.objectPath()
        let interfaces = try reader.interfacesAndProperties()
        guard reader.isAtEnd else { return nil }
        self = .interfacesAdded(path, Self.named(interfaces))
      case (BlueZ.Interface.objectManager, "InterfacesRemoved"):
        let path = try reader.objectPath()
        let names = try reader.strings()
        guard reader.isAtEnd else { return nil }
        self = .interfacesRemoved(path, names.compactMap { InterfaceName(rawValue: $0) })
      case (BlueZ.Interface.properties, "PropertiesChanged"):
        guard let interface = InterfaceName(rawValue: try reader.string()) else { return nil }
        let changed = try reader.properties()
        let invalidated = reader.isAtEnd ? [] : ((try? reader.strings()) ?? [])
        self = .propertiesChanged(
          header.path, interface, changed: changed, invalidated: invalidated)
      default:
        return nil
      }
    } catch {
      return nil
    }
  }

  /// The interfaces whose names are valid.
  private static func named(_ interfaces: [String: [String: DBusValue]])
    -> [InterfaceName: [String: DBusValue]]
  {
    var result: [InterfaceName: [String: DBusValue]] = Dictionary(
      minimumCapacity: interfaces.count)
    for (name, properties) in interfaces {
      if let interface = InterfaceName(rawValue: name) { result[interface] = properties }
    }
    return result
  }
}

/// An observer's place in a ``BlueZObjectTree``: ``cancel()`` stops the calls. Cancelling never
/// waits for the tree, so it is safe from inside a handler (or anything a handler triggers).
public final class BlueZObjectObservation: Sendable {
  private struct State {
    var cancelled = false
    var ended = false
    var onEnd: [@Sendable () -> Void] = []
  }
  private let state = Mutex(State())

  init() {}

  /// Whether the observation was cancelled (or its tree stopped).
  public var isCancelled: Bool { state.withLock { $0.cancelled } }

  /// Stops the calls; the tree forgets the handler at its next change.
  public func cancel() {
    state.withLock { $0.cancelled = true }
  }

  /// Runs `action` when the tree stops (at once if it already has).
  public func onEnd(_ action: @escaping @Sendable () -> Void) {
    let ended = state.withLock { state in
      if !state.ended { state.onEnd.append(action) }
      return state.ended
    }
    if ended { action() }
  }

  /// The tree stopped.
  func end() {
    let actions = state.withLock { state in
      state.cancelled = true
      state.ended = true
      defer { state.onEnd.removeAll() }
      return state.onEnd
    }
    for action in actions { action() }
  }
}
