// BlueZObjectTree: a live cache of bluetoothd's objects, kept current from ObjectManager signals.
import DBus

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
}

/// A cache of BlueZ's objects fed by `org.freedesktop.DBus.ObjectManager`.
///
/// On ``start(connection:)`` it subscribes to every signal sent by `org.bluez` and to
/// NameOwnerChanged for `org.bluez` *first*, then calls GetManagedObjects; signals that arrive
/// while the reply is pending are replayed on top of the snapshot, in order, so nothing that
/// happens between the two is lost. When bluetoothd leaves the bus the tree empties; when it
/// comes back the tree fetches everything again.
public actor BlueZObjectTree {
  /// The connection the tree listens on and proxies call through.
  public nonisolated let connection: DBusConnection
  /// The cached objects.
  public private(set) var objects: BlueZObjects = [:]
  /// Whether bluetoothd owns `org.bluez` right now.
  public private(set) var isServiceRunning = false
  /// Set when the bus refused GetManagedObjects (a policy problem, not a missing daemon).
  public private(set) var accessDeniedMessage: String?

  private var pending: [Signal]?
  private var generation = 0
  private var subscribers: [Int: AsyncStream<BlueZObjectEvent>.Continuation] = [:]
  private var nextSubscriber = 0
  private var pumps: [Task<Void, Never>] = []

  private init(connection: DBusConnection) {
    self.connection = connection
  }

  /// Starts a tree on `connection` and returns once its first snapshot is in (or bluetoothd is
  /// known to be absent).
  public static func start(connection: DBusConnection) async throws(BlueZError) -> BlueZObjectTree {
    let tree = BlueZObjectTree(connection: connection)
    try await tree.listen()
    return tree
  }

  private func listen() async throws(BlueZError) {
    let signals: SignalStream
    let owners: AsyncStream<BusName?>
    do throws(DBusError) {
      signals = try await connection.signals(MatchRule(sender: BlueZ.service))
      owners = try await connection.nameOwnerChanges(BlueZ.service)
    } catch {
      throw BlueZError(error)
    }
    pumps.append(
      Task { [weak self] in
        for await signal in signals {
          guard let self else { return }
          await self.receive(signal)
        }
      })
    pumps.append(
      Task { [weak self] in
        for await owner in owners {
          guard let self else { return }
          await self.ownerChanged(owner)
        }
      })
    let owner: BusName?
    do throws(DBusError) {
      owner = try await connection.nameOwner(BlueZ.service)
    } catch {
      throw BlueZError(error)
    }
    if owner != nil { await resync() }
  }

  /// Stops listening; subscribers' streams finish.
  public func stop() {
    for pump in pumps { pump.cancel() }
    pumps.removeAll()
    for continuation in subscribers.values { continuation.finish() }
    subscribers.removeAll()
  }

  /// The current objects and a stream of every later change, taken atomically: no change falls
  /// between the snapshot and the first event. The stream buffers without bound; dropping it
  /// (or ending iteration) unsubscribes.
  public func subscribe() -> (
    objects: BlueZObjects, isServiceRunning: Bool, events: AsyncStream<BlueZObjectEvent>
  ) {
    let id = nextSubscriber
    nextSubscriber += 1
    let (stream, continuation) = AsyncStream.makeStream(
      of: BlueZObjectEvent.self, bufferingPolicy: .unbounded)
    continuation.onTermination = { [weak self] _ in
      Task { await self?.unsubscribe(id) }
    }
    subscribers[id] = continuation
    return (objects, isServiceRunning, stream)
  }

  private func unsubscribe(_ id: Int) {
    subscribers[id] = nil
  }

  private func emit(_ event: BlueZObjectEvent) {
    for continuation in subscribers.values { continuation.yield(event) }
  }

  // MARK: Typed look-ups

  /// A typed proxy for the object at `path`, or `nil` if it lacks the interface.
  /// - Throws: ``BlueZError/Code/unexpectedValue`` when a required property is missing.
  public func proxy<P: BlueZProxy>(_ type: P.Type, at path: ObjectPath) throws(BlueZError) -> P? {
    guard let properties = objects[path]?[P.interface] else { return nil }
    return try P.make(path: path, properties: properties, connection: connection)
  }

  /// Every object with interface `P` (optionally only beneath `ancestor`), sorted by path.
  /// Objects whose required properties are missing are left out.
  public func proxies<P: BlueZProxy>(_ type: P.Type, under ancestor: ObjectPath? = nil) -> [P] {
    objects.keys.sorted().compactMap { path in
      if let ancestor, !path.isDescendant(of: ancestor) { return nil }
      guard let properties = objects[path]?[P.interface] else { return nil }
      return try? P.make(path: path, properties: properties, connection: connection)
    }
  }

  // MARK: Keeping current

  private func ownerChanged(_ owner: BusName?) async {
    if owner == nil {
      generation += 1
      pending = nil
      clear()
    } else {
      await resync()
    }
  }

  private func clear() {
    let wasRunning = isServiceRunning
    for path in objects.keys.sorted().reversed() {
      emit(.interfacesRemoved(path, Array(objects[path]!.keys)))
    }
    objects.removeAll()
    isServiceRunning = false
    if wasRunning { emit(.serviceStopped) }
  }

  private func resync() async {
    generation += 1
    let mine = generation
    pending = []
    let reply: [DBusValue]
    do throws(DBusError) {
      reply = try await connection.call(
        destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.Interface.objectManager,
        member: "GetManagedObjects")
    } catch {
      guard mine == generation else { return }
      pending = nil
      let mapped = BlueZError(error)
      if mapped.code == .accessDenied {
        accessDeniedMessage = mapped.description
        emit(.accessDenied(mapped.description))
      }
      return
    }
    guard mine == generation else { return }
    let snapshot = reply.first.map(Self.decodeManagedObjects) ?? [:]
    if !objects.isEmpty { clear() }
    accessDeniedMessage = nil
    objects = snapshot
    for path in snapshot.keys.sorted() {
      emit(.interfacesAdded(path, snapshot[path]!))
    }
    let replay = pending ?? []
    pending = nil
    for signal in replay { apply(signal) }
    isServiceRunning = true
    emit(.serviceStarted)
  }

  private func receive(_ signal: Signal) {
    if pending != nil {
      pending!.append(signal)
    } else {
      apply(signal)
    }
  }

  private func apply(_ signal: Signal) {
    let args = signal.arguments
    switch (signal.interface, signal.member.rawValue) {
    case (BlueZ.Interface.objectManager, "InterfacesAdded"):
      guard args.count == 2, let path = args[0].objectPathValue else { return }
      let added = Self.decodeInterfaces(args[1])
      guard !added.isEmpty else { return }
      objects[path, default: [:]].merge(added) { _, new in new }
      emit(.interfacesAdded(path, added))
    case (BlueZ.Interface.objectManager, "InterfacesRemoved"):
      guard args.count == 2, let path = args[0].objectPathValue,
        let names = args[1].stringArrayValue
      else { return }
      let removed = names.compactMap { InterfaceName(rawValue: $0) }
      guard var interfaces = objects[path] else { return }
      for name in removed { interfaces[name] = nil }
      objects[path] = interfaces.isEmpty ? nil : interfaces
      emit(.interfacesRemoved(path, removed))
    case (BlueZ.Interface.properties, "PropertiesChanged"):
      guard args.count >= 2, let name = args[0].stringValue,
        let interface = InterfaceName(rawValue: name),
        let changed = args[1].stringVariantDictionary
      else { return }
      let invalidated = args.count > 2 ? (args[2].stringArrayValue ?? []) : []
      guard var properties = objects[signal.path]?[interface] else { return }
      properties.merge(changed.mapValues(\.unwrapped)) { _, new in new }
      for name in invalidated { properties[name] = nil }
      objects[signal.path]![interface] = properties
      emit(
        .propertiesChanged(
          signal.path, interface, changed: changed.mapValues(\.unwrapped),
          invalidated: invalidated, current: properties))
    default:
      return
    }
  }

  /// Decodes GetManagedObjects' `a{oa{sa{sv}}}`.
  static func decodeManagedObjects(_ value: DBusValue) -> BlueZObjects {
    var result: BlueZObjects = [:]
    for entry in value.dictionaryValue ?? [] {
      guard let path = entry.key.objectPathValue else { continue }
      let interfaces = decodeInterfaces(entry.value)
      if !interfaces.isEmpty { result[path] = interfaces }
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
      result[name] = (entry.value.stringVariantDictionary ?? [:]).mapValues(\.unwrapped)
    }
    return result
  }
}
