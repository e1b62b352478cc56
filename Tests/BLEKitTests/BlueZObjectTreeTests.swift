import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

// BlueZObjectTree and CentralManager against a stand-in for bluetoothd on a private bus: the
// first snapshot, InterfacesAdded/Removed, PropertiesChanged, and bluetoothd leaving and coming
// back (NameOwnerChanged).
@testable import BLEKit

/// A fake org.bluez that exports plain objects (adapters, devices) under an ObjectManager at /.
private final class FakeBlueZObjects: Sendable {
  let connection: DBusConnection

  init(bus: ClientTestBus) async throws {
    connection = try bus.connect()
    try connection.addObjectManager(at: "/")
    _ = try await connection.requestName(BlueZ.service)
  }

  static func interface(_ name: InterfaceName, _ properties: [String: DBusValue])
    -> ExportedInterface
  {
    ExportedInterface(
      name: name,
      properties: properties.map { name, value in
        ExportedProperty(name: name, signature: value.signature, access: .read) { value }
      })
  }

  func exportAdapter(_ name: String, powered: Bool) throws {
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          Adapter1.interface,
          [
            "Address": .string("00:AA:01:00:00:0\(name.last!)"), "Powered": .bool(powered),
            "Discovering": .bool(false),
          ])
      ]), at: ObjectPath("/org/bluez/\(name)"))
  }

  func exportDevice(_ path: ObjectPath, address: String, uuids: [String]) throws {
    try connection.export(
      ExportedObject(interfaces: [
        Self.interface(
          Device1.interface,
          [
            "Address": .string(address), "Adapter": .objectPath("/org/bluez/hci0"),
            "Connected": .bool(false), "UUIDs": .strings(uuids), "RSSI": .int16(127),
            "ManufacturerData": .dictionary(
              key: "q", value: "v",
              [DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([2, 16, 1])))]),
          ])
      ]), at: path)
  }

  func close() { connection.close() }
}

/// Runs `body` with a tree on a private bus, over a fake bluetoothd that exports one powered
/// adapter (hci0).
private func withTree(
  _ body: (FakeBlueZObjects, BlueZObjectTree) async throws -> Void
) async throws {
  let bus = try ClientTestBus()
  defer { bus.stop() }
  let bluez = try await FakeBlueZObjects(bus: bus)
  defer { bluez.close() }
  try bluez.exportAdapter("hci0", powered: true)
  let client = try bus.connect()
  defer { client.close() }
  try await body(bluez, try await BlueZObjectTree.start(connection: client))
}

/// Waits for the first event that `match` accepts (the stream is unbounded, so none is lost).
private func next<T>(
  _ events: AsyncStream<BlueZObjectEvent>, _ match: (BlueZObjectEvent) -> T?
) async -> T? {
  for await event in events {
    if let value = match(event) { return value }
  }
  return nil
}

@Suite struct BlueZObjectTreeTests {
  static let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"

  @Test func snapshotThenLiveChanges() async throws {
    try await withTree { bluez, tree in
      let client = tree.connection
      let (snapshot, running, events) = tree.subscribe()
      #expect(running)
      let adapter = try #require(try tree.proxy(Adapter1.self, at: "/org/bluez/hci0"))
      #expect(adapter[Adapter1.powered] == true)
      #expect(adapter[Adapter1.address] == "00:AA:01:00:00:00")
      #expect(adapter[Adapter1.roles] == nil)  // absent optional property: nil
      #expect(snapshot.keys.contains("/org/bluez/hci0"))

      try bluez.exportDevice(
        Self.device, address: "00:AA:01:01:00:01", uuids: ["0000180f-0000-1000-8000-00805f9b34fb"])
      let added = await next(events) { event -> [String: DBusValue]? in
        if case .interfacesAdded(Self.device, let interfaces) = event {
          return interfaces[Device1.interface]
        }
        return nil
      }
      let device = try Device1.make(
        path: Self.device, properties: try #require(added), connection: client)
      #expect(device[Device1.manufacturerData] == [0xFFFF: [2, 16, 1]])
      #expect(device[Device1.rssi] == 127)

      try bluez.connection.emitPropertiesChanged(
        path: Self.device, interface: Device1.interface, changed: ["RSSI": .int16(-60)],
        invalidated: ["ManufacturerData"])
      let changes = await next(events) { event -> PropertyChanges<Device1>? in
        if case .propertiesChanged(Self.device, Device1.interface, let changed, let gone, _) = event
        {
          return PropertyChanges(changed: changed, invalidated: gone)
        }
        return nil
      }
      let typed = try #require(changes)
      guard case .changed(let rssi)? = typed[Device1.rssi] else {
        Issue.record("RSSI change not decoded")
        return
      }
      #expect(rssi == -60)
      guard case .removed? = typed[Device1.manufacturerData] else {
        Issue.record("invalidated ManufacturerData not reported as removed")
        return
      }
      #expect(typed[Device1.name] == nil)
      let current = try #require(try tree.proxy(Device1.self, at: Self.device))
      #expect(current[Device1.rssi] == -60)
      #expect(current[Device1.manufacturerData] == nil)

      bluez.connection.unexport(Self.device)
      let removed = await next(events) { event -> Bool? in
        if case .interfacesRemoved(Self.device, _) = event { return true }
        return nil
      }
      #expect(removed == true)
      #expect(try tree.proxy(Device1.self, at: Self.device) == nil)
      tree.stop()
    }
  }

  @Test func newDevicesGoToTheDevicesHandlerBeforeTheTreeHasThem() async throws {
    try await withTree { bluez, tree in
      let log = Mutex<[String]>([])
      let scanning = tree.observe(
        { event in
          if case .interfacesAdded(let path, _) = event {
            log.withLock { $0.append("handler \(path)") }
          }
        },
        devices: { path, advertisement in
          log.withLock { $0.append("device \(path) \(advertisement?.address ?? "-")") }
        })
      let plain = tree.observe { event in
        if case .interfacesAdded(let path, _) = event {
          log.withLock { $0.append("added \(path)") }
        }
      }
      try bluez.exportDevice(Self.device, address: "00:AA:01:01:00:01", uuids: [])
      #expect(await eventually { log.withLock { $0.count } == 2 })
      // The devices handler first (read straight from the signal), then the tree's event for
      // the others; the devices observer's own handler never sees the new device.
      #expect(
        log.withLock { $0 } == [
          "device \(Self.device) 00:AA:01:01:00:01", "added \(Self.device)",
        ])
      scanning.cancel()
      plain.cancel()
      tree.stop()
    }
  }

  @Test func aReplayHandsNewDevicesToItsDevicesHandler() throws {
    let device: [String: DBusValue] = [
      "Address": .string("00:00:00:00:00:00"), "Adapter": .objectPath("/org/bluez/hci0"),
      "Connected": .bool(false), "Name": .string("replayed"), "RSSI": .int16(-50),
    ]
    let added = try DBusMessage.signal(
      path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
    try added.append([
      .objectPath(Self.device),
      .dictionary(
        key: "s", value: "a{sv}",
        [
          DBusDictEntry(
            key: .string(Device1.interface.rawValue), value: .dictionaryOfVariants(device))
        ]),
    ])
    // Through the wire format, as a received signal is.
    let messages = [try DBusMessage(wireBytes: try added.wireBytes())]
    let seen = Mutex<[DeviceAdvertisement?]>([])
    let events = BlueZObjectTree.replay(messages) { path, advertisement in
      #expect(path == Self.device)
      seen.withLock { $0.append(advertisement) }
    }
    #expect(events.isEmpty)  // the new device went to the devices handler only
    let advertisement = try #require(seen.withLock { $0 }.first ?? nil)
    #expect(advertisement.name == "replayed")
    #expect(advertisement.rssi == -50)
    #expect(advertisement == DeviceAdvertisement(device))
    // Without a devices handler the same signal is an ordinary event.
    #expect(BlueZObjectTree.replay(messages).count == 1)
  }

  /// Found by the bluez-readers fuzz target: an InterfacesAdded naming Device1 more than once
  /// was announced, from the early hand-over read straight from the message, with every
  /// entry's properties (here the second's name) while the tree held the last entry alone.
  /// The device is now handed over as the tree holds it.
  @Test func aDeviceNamedTwiceIsAnnouncedAsTheTreeHoldsIt() throws {
    let first: [String: DBusValue] = [
      "Address": .string("00:00:00:00:00:00"), "Adapter": .objectPath("/org/bluez/hci0"),
      "Connected": .bool(false),
    ]
    let second: [String: DBusValue] = [
      "Address": .string("00:00:00:00:00:01"), "Adapter": .objectPath("/org/bluez/hci0"),
      "Connected": .bool(true),
    ]
    let added = try DBusMessage.signal(
      path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
    try added.append([
      .objectPath(Self.device),
      .dictionary(
        key: "s", value: "a{sv}",
        [
          DBusDictEntry(
            key: .string(Device1.interface.rawValue), value: .dictionaryOfVariants(first)),
          DBusDictEntry(
            key: .string(Device1.interface.rawValue),
            value: .dictionaryOfVariants(["Name": .string("again")])),
          DBusDictEntry(
            key: .string(Device1.interface.rawValue), value: .dictionaryOfVariants(second)),
        ]),
    ])
    let messages = [try DBusMessage(wireBytes: try added.wireBytes())]
    let seen = Mutex<[DeviceAdvertisement?]>([])
    _ = BlueZObjectTree.replay(messages) { _, advertisement in
      seen.withLock { $0.append(advertisement) }
    }
    #expect(seen.withLock { $0 } == [DeviceAdvertisement(second)])
  }

  @Test func followsBluetoothdLeavingAndComingBack() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let client = try bus.connect()
    defer { client.close() }
    let tree = try await BlueZObjectTree.start(connection: client)
    let (_, _, events) = tree.subscribe()

    bluez.close()  // bluetoothd "exits"
    let stopped = await next(events) { event -> Bool? in
      if case .serviceStopped = event { return true }
      return nil
    }
    #expect(stopped == true)
    #expect(tree.objects.isEmpty)
    #expect(tree.isServiceRunning == false)

    let again = try await FakeBlueZObjects(bus: bus)  // and restarts
    defer { again.close() }
    try again.exportAdapter("hci0", powered: false)
    // The adapter may come with the resync or as InterfacesAdded after it; wait for both.
    var sawStart = false
    var sawAdapter = false
    for await event in events {
      switch event {
      case .serviceStarted: sawStart = true
      case .interfacesAdded("/org/bluez/hci0", _): sawAdapter = true
      default: break
      }
      if sawStart && sawAdapter { break }
    }
    #expect(sawStart && sawAdapter)
    let adapter = try #require(try tree.proxy(Adapter1.self, at: "/org/bluez/hci0"))
    #expect(adapter[Adapter1.powered] == false)
    tree.stop()
  }

  @Test func losingTheBusEmptiesAndStopsTheTree() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let client = try bus.connect()
    defer { client.close() }
    let tree = try await BlueZObjectTree.start(connection: client)
    #expect(tree.isServiceRunning)
    let (_, _, events) = tree.subscribe()
    let ended = Mutex(false)
    let observation = tree.observe { _ in }
    observation.onEnd { ended.withLock { $0 = true } }

    bus.stop()  // dbus-daemon dies (bluetoothd with it, on a real system)
    // The subscriber hears `.connectionLost` last, then its stream ends.
    let heard = await within(.seconds(5)) { () -> [BlueZObjectEvent] in
      var all: [BlueZObjectEvent] = []
      for await event in events { all.append(event) }
      return all
    }
    let all = try #require(heard.value, "the tree's stream did not end after the bus died")
    guard case .connectionLost(let message)? = all.last else {
      Issue.record("expected .connectionLost last, got \(all)")
      return
    }
    #expect(message.contains("system bus"))
    #expect(tree.isServiceRunning == false)
    #expect(tree.objects.isEmpty)
    #expect(tree.connectionLostMessage == message)
    #expect(ended.withLock { $0 })
    // Later observers end at once.
    let late = tree.observe { _ in }
    #expect(late.isCancelled)
  }

  @Test func centralFailsFastOnceTheBusIsLost() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let central = try await CentralManager.open(connection: try bus.connect())
    #expect(await central.state == .poweredOn)
    let updates = await central.stateUpdates()
    bus.stop()
    // The state stream ends (nothing can change any more), and the central says why.
    let states = await within(.seconds(5)) { () -> [CentralState] in
      var all: [CentralState] = []
      for await state in updates { all.append(state) }
      return all
    }
    #expect(states.value?.last == .serviceUnavailable)
    let error = await #expect(throws: BluetoothError.self) {
      try await central.requirePoweredOn()
    }
    #expect(error?.code == .busLost)
    // Waiting for a state returns at once instead of waiting out its limit.
    let start = ContinuousClock.now
    await #expect(throws: BluetoothError.self) {
      try await central.waitUntilPoweredOn(timeout: .seconds(15))
    }
    #expect(ContinuousClock.now - start < .seconds(5))
    await central.close()
  }

  @Test func aFailedSnapshotIsFetchedAgain() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let client = try bus.connect()
    defer { client.close() }
    let tree = try await BlueZObjectTree.start(connection: client)  // no bluetoothd yet
    #expect(tree.isServiceRunning == false)
    // bluetoothd arrives, and fails its first GetManagedObjects.
    let bluez = try bus.connect()
    defer { bluez.close() }
    let calls = Mutex(0)
    let adapter = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string(Adapter1.interface.rawValue),
          value: .dictionaryOfVariants([
            "Address": .string("00:AA:01:00:00:00"), "Powered": .bool(true),
            "Discovering": .bool(false),
          ]))
      ])
    try bluez.export(
      ExportedObject(interfaces: [
        ExportedInterface(
          name: BlueZ.Interface.objectManager,
          methods: [
            ExportedMethod(
              name: "GetManagedObjects", inSignature: "", outSignature: "a{oa{sa{sv}}}"
            ) { _ in
              let call = calls.withLock {
                $0 += 1
                return $0
              }
              if call == 1 {
                throw DBusError.remote(
                  name: "org.freedesktop.DBus.Error.Failed", message: "not ready yet")
              }
              return [
                .dictionary(
                  key: "o", value: "a{sa{sv}}",
                  [DBusDictEntry(key: .objectPath("/org/bluez/hci0"), value: adapter)])
              ]
            }
          ])
      ]), at: "/")
    _ = try await bluez.requestName(BlueZ.service)
    #expect(await eventually { tree.isServiceRunning })
    #expect(calls.withLock { $0 } >= 2)
    let proxy = try #require(try tree.proxy(Adapter1.self, at: "/org/bluez/hci0"))
    #expect(proxy[Adapter1.powered] == true)
    tree.stop()
  }

  @Test func closingACentralClosesTheConnectionItOpened() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let address = bus.address
    let central = try await CentralManager.open(
      adapter: nil, connecting: { () throws(DBusError) in try DBusConnection(address: address) })
    let connection = central.objects.connection
    #expect(connection.isClosed == false)
    await central.close()
    // Its socket, reading thread and queue go with it.
    #expect(connection.isClosed)

    // A connection given to open stays the caller's.
    let given = try bus.connect()
    defer { given.close() }
    let other = try await CentralManager.open(connection: given)
    await other.close()
    #expect(given.isClosed == false)
  }

  @Test func centralStateFromAdapters() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }

    // No bluetoothd on the bus at all.
    let lonely = try await CentralManager.open(connection: try bus.connect())
    #expect(await lonely.state == .serviceUnavailable)
    await #expect(throws: BluetoothError.self) { try await lonely.requirePoweredOn() }
    await lonely.close()

    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportAdapter("hci1", powered: false)

    let central = try await CentralManager.open(connection: try bus.connect())
    #expect(await central.state == .poweredOn)
    #expect(await central.adapterName == "hci0")
    await central.close()

    let second = try await CentralManager.open(adapter: "hci1", connection: try bus.connect())
    #expect(await second.state == .poweredOff)
    let offError = await #expect(throws: BluetoothError.self) {
      try await second.requirePoweredOn()
    }
    #expect(offError?.code == .poweredOff)
    await second.close()

    let unknown = await #expect(throws: BluetoothError.self) {
      _ = try await CentralManager.open(adapter: "hci7", connection: try bus.connect())
    }
    #expect(unknown?.code == .adapterNotFound)
    #expect(unknown?.message.contains("hci0, hci1") == true)
  }
}

@Suite struct ManagedObjectsDecodingTests {
  @Test func aPathNamedTwiceKeepsItsLastEntryEvenAnEmptyOne() {
    let path: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
    let device = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string(Device1.interface.rawValue),
          value: .dictionaryOfVariants(["Address": .string("00:AA:01:01:00:01")]))
      ])
    let nothing = DBusValue.dictionary(key: "s", value: "a{sv}", [])
    func reply(_ values: [DBusValue]) -> DBusValue {
      .dictionary(
        key: "o", value: "a{sa{sv}}",
        values.map { DBusDictEntry(key: .objectPath(path), value: $0) })
    }
    // Found by the bluez-readers fuzz target: the earlier entry used to survive an empty one.
    #expect(BlueZObjectTree.decodeManagedObjects(reply([device, nothing]))[path] == nil)
    #expect(BlueZObjectTree.decodeManagedObjects(reply([nothing, device]))[path] != nil)
  }
}
