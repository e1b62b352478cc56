// One follower of bluetoothd per connection: whatever a manager runs (supervision, connection
// and state streams, advertising, a pairing agent, a passive scan), its connection asks the bus
// for bluetoothd's signals and name changes exactly as one object tree does, no more.
import BlueZ
import Bluetooth
import DBus
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1)), .serialized)
struct OneFollowerTests {
  /// The match rules of `connection` that follow bluetoothd: signals sent by `org.bluez`, and
  /// its owner changes.
  static func bluetoothdRules(on connection: DBusConnection) -> [String] {
    connection.subscribedRules.filter {
      $0.sender == BlueZ.service || $0.arg0 == BlueZ.service.rawValue
    }.map(\.ruleString).sorted()
  }

  /// What one tree alone asks of the bus for bluetoothd, on a connection of its own.
  static func oneTreesRules(on bus: PrivateBus) async throws -> [String] {
    let connection = try bus.connect()
    defer { connection.close() }
    let tree = try await BlueZObjectTree.start(connection: connection)
    defer { tree.stop() }
    return bluetoothdRules(on: connection)
  }

  @Test func aPeripheralManagerFollowsBluetoothdOnce() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    defer { bluetoothd.close() }
    let one = try await Self.oneTreesRules(on: bus)
    #expect(!one.isEmpty)

    let app = try bus.connect()
    defer { app.close() }
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: app)
    let service = BluetoothUUID(uint16: 0xFFF0)
    try await manager.add(
      MutableService(
        type: service,
        characteristics: [
          MutableCharacteristic(
            type: BluetoothUUID(uint16: 0xFFF1), properties: [.notify], permissions: [])
        ]))
    try await manager.startAdvertising(AdvertisingPayload(serviceUUIDs: [service]))
    let supervision = try await manager.supervise()
    let links = try await manager.connectionEvents()
    let states = try await manager.stateUpdates()
    #expect(Self.bluetoothdRules(on: app) == one)
    _ = (supervision, links, states)
    await manager.close()
  }

  @Test func aCentralsPairingAgentAndPassiveScanUseItsTree() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeMonitoringBlueZ(bus: bus)
    defer { bluez.connection.close() }
    try bluez.connection.export(
      ExportedObject(interfaces: [
        ExportedInterface(
          name: AgentManager1.interface,
          methods: [
            ExportedMethod(name: "RegisterAgent", inSignature: "os", outSignature: "") { _ in [] },
            ExportedMethod(name: "UnregisterAgent", inSignature: "o", outSignature: "") { _ in [] },
          ])
      ]), at: AgentManager1.path)
    let one = try await Self.oneTreesRules(on: bus)

    let connection = try bus.connect()
    defer { connection.close() }
    let central = try await CentralManager.open(connection: connection)
    let agent = try await PairingAgent.register(
      for: central, policy: PairingPolicy(confirmation: .automatic))
    let scan = try await central.scan(ScanOptions(manufacturerIDs: [0xFFFF], mode: .passive))
    #expect(Self.bluetoothdRules(on: connection) == one)

    // The agent admits bluetoothd (the owner the tree follows) and no one else.
    let reply = try await bluez.connection.call(
      destination: connection.uniqueName, path: agent.path, interface: Agent1.interface,
      member: "RequestAuthorization",
      arguments: [.objectPath(FakeMonitoringBlueZ.device(1))])
    #expect(reply == [])
    let stranger = try bus.connect()
    defer { stranger.close() }
    let refused = await #expect(throws: DBusError.self) {
      _ = try await stranger.call(
        destination: connection.uniqueName, path: agent.path, interface: Agent1.interface,
        member: "RequestAuthorization",
        arguments: [.objectPath(FakeMonitoringBlueZ.device(1))])
    }
    #expect(refused?.name == "org.bluez.Error.NotAuthorized")
    scan.stop()
    await agent.unregister()
    await central.close()
  }
}
