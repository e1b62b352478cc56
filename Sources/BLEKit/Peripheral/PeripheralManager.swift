// PeripheralManager: the peripheral role over BlueZ (CoreBluetooth's CBPeripheralManager):
// publish services, answer reads and writes, notify subscribers with back-pressure.
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// Publishes GATT services on one adapter and advertises them.
///
/// ```swift
/// let manager = try await PeripheralManager.open(adapter: "hci1")
/// let characteristic = MutableCharacteristic(
///   type: uuid, properties: [.notify, .writeWithoutResponse], permissions: [.writeable])
/// try await manager.add(MutableService(type: serviceUUID, characteristics: [characteristic]))
/// try await manager.startAdvertising(
///   AdvertisingPayload(discoverable: true, serviceUUIDs: [serviceUUID]))
/// for await event in manager.events { ... }
/// ```
///
/// Every service is its own GATT application (`GattManager1.RegisterApplication`, with an
/// ObjectManager at its root); exported objects answer only bluetoothd. ``close()``
/// unregisters everything; call it on every exit path, also after Ctrl-C: it finishes even
/// in a cancelled task.
// A class with its state behind a Mutex, where CentralManager is an actor: bluetoothd's calls
// to the exported characteristics (ReadValue, WriteValue, AcquireNotify) are answered on the
// D-Bus connection's queue, and what they touch of the manager (its channels, its event queue
// and counters) is used there without a hop to another executor; CoreBluetooth's synchronous
// calls (updateValue(_:for:) returning a Bool, isSubscribed, maximumUpdateValueLength) stay
// synchronous. The lock guards dictionary updates only, never an await or a user's closure.
public final class PeripheralManager: Sendable {
  /// The adapter's name, e.g. `hci1`.
  public let adapterName: String
  /// The adapter's object path, e.g. `/org/bluez/hci1`.
  package let adapterPath: ObjectPath
  /// Subscriptions, writes, readiness, advertising ending; at most ``eventLimit`` wait unread
  /// (see ``PeripheralManagerEvents`` for what happens to writes beyond it).
  public let events: PeripheralManagerEvents

  /// The most events ``events`` holds unread: 4,096. A write's value is at most 512 bytes
  /// (ATT's longest attribute value), so that is at most about 2 MiB of queued writes; at the
  /// fastest LE link that is about a second of writes without response, at a usual pace far
  /// more. An app further behind than that is not keeping up.
  public static let eventLimit = 4_096

  /// Write requests refused (the central got an ATT error) because ``eventLimit`` events
  /// waited unread and the write's event would have been its only trace.
  public var refusedWrites: Int { eventQueue.refused }

  /// Accepted writes whose events were dropped because ``eventLimit`` events waited unread
  /// (writes without response, writes an `onWrite` handler took, descriptor writes).
  public var droppedWriteEvents: Int { eventQueue.dropped }

  let connection: DBusConnection
  /// The manager's one follower of bluetoothd: its objects, its running or not, its bus name.
  /// Started at open, stopped at close; connection and state streams, the supervision, the
  /// re-advertising follower and the caller check all read it.
  package let objects: BlueZObjectTree
  /// Admits calls from the owner of `org.bluez` as ``objects`` follows it.
  let callerCheck: BluetoothdCallerCheck
  /// What the running bluetoothd does with notify sockets (from its release, read at open).
  package let bluetoothd: BluetoothdFeatures
  let eventQueue: PeripheralEventQueue
  /// Where events go (the same queue; the name its producers use).
  var eventContinuation: PeripheralEventQueue { eventQueue }
  let ownsConnection: Bool

  struct Published: Sendable {
    let service: MutableService
    let registration: GattApplicationRegistration
    let channels: [NotificationChannel]
  }
  struct State: Sendable {
    var services: [ObjectIdentifier: Published] = [:]
    var channels: [ObjectIdentifier: NotificationChannel] = [:]
    var advertisement: LEAdvertisementRegistration?
    /// What `advertisement` registered, when it is connectable: registered again on each new
    /// link (PeripheralManagerReadvertising.swift).
    var connectableAdvertisement: LEAdvertisement?
    /// Whether a follower of the adapter's links already registers it again.
    var followsLinksForAdvertising = false
    /// Whether the kernel drives the adapter with extended advertising sets (it reports
    /// secondary channels); only then is an advertisement registered again on a new link.
    var extendedAdvertising = false
    var nextApplication = 0
    var nextAdvertisement = 0
    var closed = false
  }
  let state = Mutex(State())

  private init(
    adapterName: String, adapterPath: ObjectPath, objects: BlueZObjectTree,
    ownsConnection: Bool, bluetoothd: BluetoothdFeatures, eventLimit: Int
  ) {
    self.adapterName = adapterName
    self.adapterPath = adapterPath
    self.connection = objects.connection
    self.objects = objects
    self.ownsConnection = ownsConnection
    self.callerCheck = BluetoothdCallerCheck(following: objects)
    self.bluetoothd = bluetoothd
    // Bounded: a central can write as fast as the link goes, an app can stop reading (its
    // output blocked); writes beyond the bound are refused or dropped, and counted.
    (events, eventQueue) = PeripheralEventQueue.make(limit: eventLimit)
  }

  /// Opens the peripheral role on `adapter` (e.g. `hci1`; nil picks `hci0`, else the first).
  ///
  /// - Throws: ``BluetoothError`` with code
  ///   ``BluetoothError/Code/serviceUnavailable`` when bluetoothd is not running,
  ///   ``BluetoothError/Code/adapterNotFound`` for an unknown adapter,
  ///   ``BluetoothError/Code/notReady`` when it is powered off or lacks the GATT or advertising
  ///   manager.
  public static func open(adapter: String? = nil) async throws(BluetoothError)
    -> PeripheralManager
  {
    try await open(adapter: adapter, connection: nil)
  }

  /// Opens the peripheral role on a connection the caller owns (tests' private buses), or on
  /// a system bus connection of its own when `connection` is `nil`. `bluetoothd` says what
  /// the daemon does where nothing on D-Bus tells (nil: read from its release,
  /// ``BluetoothdFeatures/read(on:)``).
  package static func open(
    adapter: String? = nil, connection: DBusConnection?, bluetoothd: BluetoothdFeatures? = nil,
    eventLimit: Int = PeripheralManager.eventLimit
  ) async throws(BluetoothError) -> PeripheralManager {
    let bus: DBusConnection
    do throws(DBusError) {
      if let connection { bus = connection } else { bus = try DBusConnection.system() }
    } catch {
      throw .bluez(
        BlueZError(.bus, "cannot connect to the system bus: \(error.description)"))
    }
    var tree: BlueZObjectTree?
    do {
      let objects = try await BlueZObjectTree.start(connection: bus)
      tree = objects
      let (name, path) = try await findAdapter(adapter, in: objects)
      var features = bluetoothd
      if features == nil { features = await BluetoothdFeatures.read(on: bus) }
      return PeripheralManager(
        adapterName: name, adapterPath: path, objects: objects, ownsConnection: connection == nil,
        bluetoothd: features ?? BluetoothdFeatures(version: nil), eventLimit: eventLimit)
    } catch {
      tree?.stop()
      if connection == nil { bus.close() }
      throw .bluez(error)
    }
  }

  /// Looks the adapter up in bluetoothd's objects and checks it can serve.
  static func findAdapter(_ name: String?, in tree: BlueZObjectTree) async throws(BlueZError)
    -> (String, ObjectPath)
  {
    let adapters = try await currentObjects(of: tree).filter {
      $0.value[Adapter1.interface] != nil
    }
    guard let path = CentralManager.chooseAdapter(name, among: Array(adapters.keys)),
      let interfaces = adapters[path]
    else {
      let known = adapters.keys.map { $0.lastComponent }
        .sorted()
      let list = known.isEmpty ? "none" : known.joined(separator: ", ")
      throw BlueZError(
        .adapterNotFound,
        name.map { "no Bluetooth adapter named \($0) (adapters: \(list))" }
          ?? "no Bluetooth adapter")
    }
    let adapterName = path.lastComponent
    let powered = interfaces[Adapter1.interface]?[Adapter1.powered.name]?.boolValue ?? false
    guard powered else {
      throw BlueZError(.notReady, "Bluetooth adapter \(adapterName) is powered off")
    }
    guard interfaces[BlueZ.Interface.gattManager] != nil else {
      throw BlueZError(.notSupported, "adapter \(adapterName) has no GATT server (GattManager1)")
    }
    return (adapterName, path)
  }

  /// bluetoothd's objects as `tree` holds them. While the tree holds none (bluetoothd absent,
  /// the bus refusing, the tree's snapshot still being fetched), one `GetManagedObjects` gives
  /// the bus's own answer: the objects, or the error that says why there are none.
  static func currentObjects(of tree: BlueZObjectTree) async throws(BlueZError) -> BlueZObjects {
    if tree.isServiceRunning { return tree.objects }
    return try await BlueZObjectTree.managedObjects(on: tree.connection)
  }

  // MARK: - Services

  /// Publishes `service` (`GattManager1.RegisterApplication`). The service's characteristics
  /// are then what ``updateValue(_:for:)`` and ``send(_:for:)`` accept.
  public func add(_ service: MutableService) async throws(BluetoothError) {
    let number = try state.withLock { state throws(BluetoothError) -> Int in
      if state.closed { throw .closed }
      defer { state.nextApplication += 1 }
      return state.nextApplication
    }
    let root = ObjectPath.applicationRoot.appending("app\(number)")
    let channels = service.characteristics.map {
      NotificationChannel(characteristic: $0, events: eventContinuation, features: bluetoothd)
    }
    let local = LocalService(
      uuid: service.uuid.uuidString, isPrimary: service.isPrimary,
      characteristics: channels.map(Self.localCharacteristic(for:)))
    let manager = GattManager1(connection: connection, adapter: adapterPath)
    let registration: GattApplicationRegistration
    do {
      registration = try await manager.register(
        GattApplication(services: [local]), at: root, callerCheck: callerCheck)
    } catch {
      throw .bluez(error)
    }
    for (index, channel) in channels.enumerated() {
      channel.attach(
        registration: registration, path: registration.path(service: 0, characteristic: index))
    }
    let stillOpen = state.withLock { state in
      guard !state.closed else { return false }
      state.services[ObjectIdentifier(service)] = Published(
        service: service, registration: registration, channels: channels)
      for channel in channels {
        state.channels[ObjectIdentifier(channel.characteristic)] = channel
      }
      return true
    }
    if !stillOpen {
      // Closed meanwhile (often by Ctrl-C, which also cancelled this task): undo on our own.
      await runCleanup { await registration.unregister() }
      throw .closed
    }
  }

  /// Withdraws a published service (`GattManager1.UnregisterApplication`), also when the
  /// calling task was cancelled (bounded by `runCleanup(within:_:)`).
  public func remove(_ service: MutableService) async {
    let published = state.withLock { state in
      let published = state.services.removeValue(forKey: ObjectIdentifier(service))
      for channel in published?.channels ?? [] {
        state.channels[ObjectIdentifier(channel.characteristic)] = nil
      }
      return published
    }
    guard let published else { return }
    for channel in published.channels { channel.close() }
    await runCleanup { await published.registration.unregister() }
  }

  /// Withdraws every published service.
  public func removeAllServices() async {
    let services = state.withLock { Array($0.services.values.map(\.service)) }
    for service in services { await remove(service) }
  }

  // MARK: - Notifications

  /// Sends `value` to the subscribers of `characteristic` (CoreBluetooth's
  /// `updateValue(_:for:onSubscribedCentrals:)`).
  ///
  /// Returns false when the transmit queue is full: nothing was sent, and
  /// ``PeripheralManagerEvent/readyToUpdate`` follows once there is room; send the same value
  /// again then. Returns true when the value was handed to bluetoothd, or when nobody is
  /// subscribed (nothing to send).
  /// - Throws: ``BluetoothError/Code/valueTooLong`` above
  ///   ``maximumUpdateValueLength(for:)`` (BlueZ would cut it silently);
  ///   ``BluetoothError/Code/attributeNotFound``.
  public func updateValue(_ value: [UInt8], for characteristic: MutableCharacteristic)
    throws(BluetoothError) -> Bool
  {
    let channel = try channel(for: characteristic)
    switch try channel.attempt(value, signalReady: true) {
    case .sent, .notSubscribed: return true
    case .full: return false
    }
  }

  /// Sends `value` to the subscribers of `characteristic`, waiting while the queue is full.
  ///
  /// - Throws: ``BluetoothError/Code/notSubscribed`` when nobody is (or stays)
  ///   subscribed; ``BluetoothError/Code/valueTooLong``;
  ///   ``BluetoothError/Code/closed`` when the task is cancelled or the manager closes.
  public func send(_ value: [UInt8], for characteristic: MutableCharacteristic)
    async
    throws(BluetoothError)
  {
    let channel = try channel(for: characteristic)
    while true {
      if Task.isCancelled || isClosed { throw .closed }
      switch try channel.attempt(value, signalReady: false) {
      case .sent: return
      case .notSubscribed: throw .notSubscribed(characteristic.uuid)
      case .full(let generation): await channel.waitForRoom(after: generation)
      }
    }
  }

  /// The largest value one notification of `characteristic` carries now: min(MTU - 3, 512)
  /// (CoreBluetooth's `CBCentral.maximumUpdateValueLength`). 20 until bluetoothd reports an MTU.
  public func maximumUpdateValueLength(for characteristic: MutableCharacteristic) -> Int {
    (try? channel(for: characteristic))?.maximumUpdateValueLength ?? 20
  }

  /// True while at least one central is subscribed to `characteristic`.
  public func isSubscribed(_ characteristic: MutableCharacteristic) -> Bool {
    (try? channel(for: characteristic))?.isSubscribed ?? false
  }

  func channel(for characteristic: MutableCharacteristic) throws(BluetoothError)
    -> NotificationChannel
  {
    let channel = state.withLock { $0.channels[ObjectIdentifier(characteristic)] }
    guard let channel else { throw .unknownCharacteristic(characteristic.uuid) }
    return channel
  }

  /// The manager's tree (``objects``) for a new follower (a stream or a task of the
  /// manager's): one GetManagedObjects and one set of signal matches per manager, not one per
  /// stream. Followers never stop it themselves; the manager stops it when it closes.
  /// - Throws: ``BluetoothError/Code/closed`` once the manager is closed.
  func follower() throws(BluetoothError) -> BlueZObjectTree {
    if isClosed { throw BluetoothError(.closed, "the peripheral manager is closed") }
    return objects
  }

  // MARK: - Closing

  var isClosed: Bool { state.withLock { $0.closed } }

  /// Stops advertising, withdraws every service, removes every exported object and ends
  /// ``events``. Idempotent.
  ///
  /// Finishes even when the calling task is cancelled (Ctrl-C cancels a command's task, and a
  /// cancelled task would cancel the unregistering D-Bus calls).
  /// Bounded: after ``closeLimit`` the unregistering calls still pending are cancelled.
  public func close() async {
    await runCleanup(within: Self.closeLimit) { await self.closeNow() }
  }

  /// How long ``close()`` waits for bluetoothd to confirm the unregistering.
  public static let closeLimit: Duration = .seconds(10)

  private func closeNow() async {
    let (services, advertisement, wasClosed) = state.withLock { state in
      defer {
        state.closed = true
        state.services.removeAll()
        state.channels.removeAll()
        state.advertisement = nil
        state.connectableAdvertisement = nil
      }
      return (Array(state.services.values), state.advertisement, state.closed)
    }
    if wasClosed { return }
    // Followers end first. The stopped tree keeps bluetoothd's name, so the caller check
    // still admits bluetoothd's calls (`Release`) while the registrations are withdrawn.
    objects.stop()
    await advertisement?.unregister()
    for published in services {
      for channel in published.channels { channel.close() }
      await published.registration.unregister()
    }
    eventContinuation.finish()
    if ownsConnection { connection.close() }
  }
}

extension ObjectPath {
  /// Where blekit exports its GATT applications and advertisements.
  static let applicationRoot: ObjectPath = "/org/blekit"
}
