// How a notification stream's link-loss watch explains the end of the link: bluetoothd
// leaving while the bus stays, and the system bus going away (exit status 4 for `receive`).
import BlueZ
import DBus
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1))) struct NotificationLinkLossTests {
  static let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"

  /// A tree on a private bus over a stand-in for bluetoothd that exports nothing.
  private func withTree(
    _ body: (PrivateBus, DBusConnection, BlueZObjectTree) async throws -> Void
  ) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try bus.connect()
    defer { bluez.close() }
    try bluez.addObjectManager(at: "/")
    _ = try await bluez.requestName(BlueZ.service)
    let client = try bus.connect()
    defer { client.close() }
    let tree = try await BlueZObjectTree.start(connection: client)
    try await body(bus, bluez, tree)
    tree.stop()
  }

  private func watch(_ tree: BlueZObjectTree) -> Task<BluetoothError?, Never> {
    let (_, _, events) = tree.subscribe()
    return Task {
      await Peripheral.waitForLinkLoss(events, device: Self.device, name: "peer", tree: tree)
    }
  }

  @Test func bluetoothdLeavingIsSaidSo() async throws {
    try await withTree { _, bluez, tree in
      let waiting = watch(tree)
      bluez.close()  // bluetoothd exits; the bus stays
      let error = await within(.seconds(10), waiting).value
      #expect(error??.code == .serviceUnavailable)
    }
  }

  @Test func aRemovedDeviceIsSaidSoWhileTheBusStays() async throws {
    try await withTree { _, bluez, tree in
      try bluez.export(
        ExportedObject(interfaces: [
          ExportedInterface(
            name: Device1.interface,
            properties: [
              ExportedProperty(name: "Address", signature: "s", access: .read) {
                .string("00:AA:01:01:00:01")
              }
            ])
        ]), at: Self.device)
      #expect(await eventually { tree.objects[Self.device] != nil })
      let waiting = watch(tree)
      bluez.unexport(Self.device)
      let error = await within(.seconds(10), waiting).value
      #expect(error??.code == .disconnected)
    }
  }

  @Test func theBusGoingAwayIsSaidSo() async throws {
    try await withTree { bus, _, tree in
      let waiting = watch(tree)
      bus.stop()
      let error = await within(.seconds(10), waiting).value
      #expect(error??.code == .busLost)
      #expect(error??.message.contains("system bus") == true)
    }
  }
}
