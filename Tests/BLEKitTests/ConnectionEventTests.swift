import BlueZ
import DBus
import TestSupport
import Testing

// A central's connection events from bluetoothd's Device1 signals (a stand-in org.bluez on a
// private bus): links up and down, services resolved again, a device forgotten while up.
@testable import BLEKit

@Suite struct ConnectionEventTests {
  static let first = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let second = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_02")

  /// The first `count` events of `stream` (a central's or a peripheral manager's), or fewer
  /// if 5 s pass.
  static func take<Event: Sendable>(_ count: Int, from stream: AsyncStream<Event>) async
    -> [Event]
  {
    let taken = await within(.seconds(5)) { () -> [Event] in
      var events: [Event] = []
      for await event in stream {
        events.append(event)
        if events.count == count { break }
      }
      return events
    }
    return taken.value ?? []
  }

  /// Exports the Device1 object bluetoothd makes for a central (00:AA:01:00:00:00) under the
  /// fake adapter, and returns its path.
  static func exportCentral(on bluetoothd: FakeBluetoothd, connected: Bool) throws -> ObjectPath {
    let central = FakeBluetoothd.adapter.appending("dev_00_AA_01_00_00_00")
    try bluetoothd.connection.export(
      ExportedObject(interfaces: [
        FakeBlueZObjects.interface(
          Device1.interface,
          [
            "Address": .string("00:AA:01:00:00:00"), "Adapter": .objectPath(FakeBluetoothd.adapter),
            "Connected": .bool(connected),
          ])
      ]), at: central)
    return central
  }

  @Test func linksAndServicesAreReportedInOrder() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportDevice(Self.first, address: "00:AA:01:01:00:01", uuids: [])
    try bluez.exportDevice(Self.second, address: "00:AA:01:01:00:02", uuids: [])
    let central = try await CentralManager.open(connection: try bus.connect())
    let one = try #require(await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    let two = try #require(await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:02")))
    let events = await central.connectionEvents()

    func change(_ path: ObjectPath, _ changed: [String: DBusValue]) throws {
      try bluez.connection.emitPropertiesChanged(
        path: path, interface: Device1.interface, changed: changed)
    }
    try change(Self.first, ["RSSI": .int16(-40)])  // not a connection event
    try change(Self.first, ["Connected": .bool(true)])
    try change(Self.first, ["ServicesResolved": .bool(true)])
    try change(Self.first, ["ServicesResolved": .bool(false)])  // re-discovery starts: quiet
    try change(Self.first, ["ServicesResolved": .bool(true)])  // the services changed
    try change(Self.second, ["Connected": .bool(true)])
    try change(Self.first, ["Connected": .bool(false), "ServicesResolved": .bool(false)])
    try change(Self.first, ["Connected": .bool(false)])  // already down: no second report
    // bluetoothd forgets the second device while its link is up.
    bluez.connection.unexport(Self.second)

    let seen = await Self.take(6, from: events)
    #expect(
      seen == [
        .connected(one), .servicesResolved(one), .servicesResolved(one), .connected(two),
        .disconnected(one), .disconnected(two),
      ])
    await central.close()
  }

  @Test func anMTUExchangeIsOneEventPerNewValue() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportDevice(Self.first, address: "00:AA:01:01:00:01", uuids: [])
    // Two characteristics of the device's one service, as bluetoothd exports them.
    let service = Self.first.appending("service000a")
    let characteristics = [service.appending("char000b"), service.appending("char000d")]
    for path in characteristics {
      try bluez.connection.export(
        ExportedObject(interfaces: [
          FakeBlueZObjects.interface(
            GattCharacteristic1.interface,
            [
              "UUID": .string("00002a37-0000-1000-8000-00805f9b34fb"),
              "Service": .objectPath(service), "MTU": .uint16(23),
            ])
        ]), at: path)
    }
    let central = try await CentralManager.open(connection: try bus.connect())
    let one = try #require(await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    let events = await central.connectionEvents()

    // bluetoothd signals each exchange on every characteristic of the link.
    func exchange(_ mtu: UInt16) throws {
      for path in characteristics {
        try bluez.connection.emitPropertiesChanged(
          path: path, interface: GattCharacteristic1.interface, changed: ["MTU": .uint16(mtu)])
      }
    }
    try exchange(185)
    try exchange(185)  // the same value again: no event
    try exchange(517)
    try bluez.connection.emitPropertiesChanged(
      path: Self.first, interface: Device1.interface, changed: ["Connected": .bool(true)])

    let seen = await Self.take(3, from: events)
    #expect(seen == [.mtuChanged(one, mtu: 185), .mtuChanged(one, mtu: 517), .connected(one)])
    await central.close()
  }

  @Test func aLinkUpBeforeTheStreamIsReportedWhenItGoesDown() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportDevice(Self.first, address: "00:AA:01:01:00:01", uuids: [])
    let central = try await CentralManager.open(connection: try bus.connect())
    try bluez.connection.emitPropertiesChanged(
      path: Self.first, interface: Device1.interface, changed: ["Connected": .bool(true)])
    let one = try #require(await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    #expect(await eventually { central.isConnected(one) })
    let events = await central.connectionEvents()
    try bluez.connection.emitPropertiesChanged(
      path: Self.first, interface: Device1.interface, changed: ["Connected": .bool(false)])
    #expect(await Self.take(1, from: events) == [.disconnected(one)])
    await central.close()
  }

  @Test func theStreamEndsWhenTheManagerCloses() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let central = try await CentralManager.open(connection: try bus.connect())
    let events = await central.connectionEvents()
    await central.close()
    let ended = await within(.seconds(5)) { () -> Int in
      var count = 0
      for await _ in events { count += 1 }
      return count
    }
    #expect(ended.value == 0)
  }

  @Test func aCentralThatAppearsConnectedIsReported() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: try bus.connect())
    let events = try await manager.connectionEvents()
    // A new peer's Device1 announced already connected; no PropertiesChanged(Connected) follows.
    let central = try Self.exportCentral(on: bluetoothd, connected: true)
    try bluetoothd.connection.emitPropertiesChanged(
      path: central, interface: Device1.interface, changed: ["Connected": .bool(false)])
    let seen = await Self.take(2, from: events)
    let expected = Central(identifier: central.rawValue)
    #expect(seen == [.connected(expected), .disconnected(expected)])
    await manager.close()
    bluetoothd.close()
  }

  @Test func aPeripheralManagerHearsCentralsComeAndGo() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: try bus.connect())
    let events = try await manager.connectionEvents()
    // A central's Device1 appears under the adapter (bluetoothd makes one per peer), connects,
    // resolves our services (not a link change), and leaves.
    let central = try Self.exportCentral(on: bluetoothd, connected: false)
    for changed: [String: DBusValue] in [
      ["Connected": .bool(true)], ["ServicesResolved": .bool(true)], ["Connected": .bool(false)],
    ] {
      try bluetoothd.connection.emitPropertiesChanged(
        path: central, interface: Device1.interface, changed: changed)
    }
    let seen = await Self.take(2, from: events)
    let expected = Central(identifier: central.rawValue)
    #expect(seen == [.connected(expected), .disconnected(expected)])
    #expect(expected.address == "00:AA:01:00:00:00")
    // Closing the manager ends a stream still being followed.
    let more = try await manager.connectionEvents()
    await manager.close()
    let ended = await within(.seconds(5)) { () -> Int in
      var count = 0
      for await _ in more { count += 1 }
      return count
    }
    #expect(ended.value == 0)
    bluetoothd.close()
  }
}
