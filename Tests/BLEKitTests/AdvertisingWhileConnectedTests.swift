import BlueZ
import DBus
import TestSupport
import Testing

// A connectable advertisement goes on while a central is connected: the manager registers it
// again on each new link (the controller stops advertising at a connection and Linux enables
// it again only when the link ends). A stand-in bluetoothd on a private bus.
@testable import BLEKit

@Suite struct AdvertisingWhileConnectedTests {
  static let service = BluetoothUUID(uint16: 0x180D)

  /// A manager on a stand-in bluetoothd advertising `payload`, and the central's Device1
  /// object, exported but not yet connected.
  static func advertising(
    _ payload: AdvertisingPayload, on bus: PrivateBus, legacy: Bool = false
  ) async throws -> (FakeBluetoothd, PeripheralManager, ObjectPath) {
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    bluetoothd.registry.legacyAdvertising.withLock { $0 = legacy }
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: try bus.connect())
    try await manager.startAdvertising(payload)
    let central = try ConnectionEventTests.exportCentral(on: bluetoothd, connected: false)
    return (bluetoothd, manager, central)
  }

  /// The reason of the manager's first `.advertisingPaused` within 5 s, if any.
  static func pausedReason(of manager: PeripheralManager) async -> String? {
    let reported = await within(.seconds(5)) { () -> String? in
      for await event in manager.events {
        if case .advertisingPaused(let reason) = event { return reason }
      }
      return nil
    }
    return reported.value ?? nil
  }

  static func connect(_ central: ObjectPath, on bluetoothd: FakeBluetoothd) throws {
    try bluetoothd.connection.emitPropertiesChanged(
      path: central, interface: Device1.interface, changed: ["Connected": .bool(true)])
  }

  @Test func aConnectableAdvertisementIsRegisteredAgainWhenACentralConnects() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let (bluetoothd, manager, central) = try await Self.advertising(
      AdvertisingPayload(serviceUUIDs: [Self.service], localName: "hr"), on: bus)
    let registry = bluetoothd.registry
    let first = try #require(registry.advertisements.withLock { $0.keys.first })
    try Self.connect(central, on: bluetoothd)
    // One advertisement, at a new path, with the same content; the old one withdrawn.
    #expect(
      await eventually {
        registry.advertisements.withLock { $0.count == 1 && $0.keys.first != first }
      })
    let again = try #require(registry.advertisements.withLock { $0.values.first })
    #expect(again["LocalName"]?.stringValue == "hr")
    #expect(again["ServiceUUIDs"]?.stringArrayValue == [Self.service.uuidString])
    #expect(manager.isAdvertising)
    await manager.close()
    #expect(registry.advertisements.withLock { $0.isEmpty })
    bluetoothd.close()
  }

  /// Why a link leaves the advertisement paused: bluetoothd refuses a second registration,
  /// or the adapter has legacy advertising only; and the words the reason must hold.
  enum Pause: String, CaseIterable, Sendable {
    case refused = "Failed to register advertisement"
    case legacy = "legacy"
  }

  @Test(arguments: Pause.allCases)
  func aPauseKeepsTheRegistrationTheLinkCameFromAndIsReported(_ pause: Pause) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let (bluetoothd, manager, central) = try await Self.advertising(
      AdvertisingPayload(serviceUUIDs: [Self.service]), on: bus, legacy: pause == .legacy)
    let registry = bluetoothd.registry
    let first = try #require(registry.advertisements.withLock { $0.keys.first })
    registry.refusesAdvertisements.withLock { $0 = pause == .refused }
    try Self.connect(central, on: bluetoothd)
    let reported = await Self.pausedReason(of: manager)
    #expect(reported?.contains(pause.rawValue) == true)
    // The registration the link came from stays, for the kernel to enable when it ends.
    #expect(registry.advertisements.withLock { Array($0.keys) } == [first])
    #expect(manager.isAdvertising)
    await manager.close()
    #expect(registry.advertisements.withLock { $0.isEmpty })
    bluetoothd.close()
  }

  @Test func aBroadcastIsNotRegisteredAgain() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let (bluetoothd, manager, central) = try await Self.advertising(
      AdvertisingPayload(kind: .broadcast, serviceUUIDs: [Self.service]), on: bus)
    let links = try await manager.connectionEvents()
    let registry = bluetoothd.registry
    let first = try #require(registry.advertisements.withLock { $0.keys.first })
    try Self.connect(central, on: bluetoothd)
    // The link is seen (by this stream, and so by any follower), and nothing is registered.
    let seen = await ConnectionEventTests.take(1, from: links)
    #expect(seen.count == 1)
    try await Task.sleep(for: .milliseconds(300))
    #expect(registry.advertisements.withLock { Array($0.keys) } == [first])
    await manager.close()
    bluetoothd.close()
  }

  /// One session per manager: every follower of bluetoothd (connection streams, state
  /// updates, the re-advertising follower) shares the manager's object tree, and a stream
  /// dropped early leaves the others following.
  @Test func followersShareOneTreeAndOutliveAnEarlyDrop() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let (bluetoothd, manager, central) = try await Self.advertising(
      AdvertisingPayload(serviceUUIDs: [Self.service]), on: bus)
    do {
      let early = try await manager.connectionEvents()
      _ = early
    }
    let links = try await manager.connectionEvents()
    let states = try await manager.stateUpdates()
    // The manager's one tree (started at open) is what every follower reads.
    #expect(try manager.follower() === manager.objects)
    try Self.connect(central, on: bluetoothd)
    let seen = await ConnectionEventTests.take(1, from: links)
    #expect(seen.count == 1)
    var firstState: PeripheralManagerState?
    for await state in states {
      firstState = state
      break
    }
    #expect(firstState != nil)
    await manager.close()
    bluetoothd.close()
  }
}
