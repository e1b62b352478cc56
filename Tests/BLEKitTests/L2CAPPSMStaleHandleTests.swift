// Peripheral.l2capPSM() against a stand-in bluetoothd whose cached PSM characteristic is stale:
// the first read fails with ATT's Invalid Handle, as bluetoothd 5.66 words it, and the
// stand-in then replaces the characteristic's object, as bluetoothd does once the peripheral's
// Service Changed arrives. The PSM must come from the new object (rehearsal 3's l2cap suite
// failed with "ATT error: 0x01" instead).
import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1))) struct L2CAPPSMStaleHandleTests {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let service = device.appending("service0010")
  static let stale = service.appending("char0011")
  static let fresh = service.appending("char0014")
  static let psmUUID = "abdd3056-28fa-441d-a470-55a75a52553a"

  /// A PSM characteristic whose ReadValue runs `read`.
  static func characteristic(
    _ read: @escaping @Sendable () async throws -> [UInt8]
  ) -> ExportedObject {
    var interface = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      ["UUID": .string(psmUUID), "Service": .objectPath(service), "Flags": .strings(["read"])])
    interface.methods.append(
      ExportedMethod(name: "ReadValue", inSignature: "a{sv}", outSignature: "ay") { _ in
        [.bytes(try await read())]
      })
    return ExportedObject(interfaces: [interface])
  }

  /// Runs `body` with the peripheral of a stand-in bluetoothd that exports a connected device
  /// and its PSM characteristic at `stale`, reading by `read`.
  static func withPeripheral(
    reading read: @escaping @Sendable (DBusConnection) async throws -> [UInt8],
    then body: (Peripheral) async throws -> Void
  ) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      device, address: "00:AA:01:01:00:01", service: service,
      serviceUUID: "a0b40001-926d-4d61-98df-8c5c62ee53b3")
    let connection = bluez.connection
    try connection.export(characteristic { try await read(connection) }, at: stale)
    let central = try await CentralManager.open(connection: try bus.connect())
    defer { bluez.close() }
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    do {
      try await body(Peripheral(identifier: identifier, manager: central))
    } catch {
      await central.close()
      throw error
    }
    await central.close()
  }

  /// How bluetoothd handles the peripheral's Service Changed after the stale read, and the PSM
  /// the new characteristic holds.
  enum Replacement: UInt16, CaseIterable, Sendable {
    /// The stale object goes, another takes its place.
    case objectReplaced = 0x81
    /// Service Changed for the new range only: the stale object stays, a new one appears,
    /// and the one that failed must be read last.
    case staleObjectStays = 0x83
  }

  @Test(arguments: Replacement.allCases)
  func aStaleHandleIsReadAgainAtTheNewObject(_ replacement: Replacement) async throws {
    let staleReads = Atomic(0)
    try await Self.withPeripheral(
      reading: { connection in
        staleReads.add(1, ordering: .relaxed)
        if replacement == .objectReplaced { connection.unexport(Self.stale) }
        if staleReads.load(ordering: .relaxed) == 1 {
          let psm = UInt8(replacement.rawValue)
          try connection.export(Self.characteristic { [psm, 0x00] }, at: Self.fresh)
        }
        throw DBusError.remote(
          name: "org.bluez.Error.Failed", message: "Operation failed with ATT error: 0x01")
      },
      then: { peripheral in
        let psm = try await peripheral.l2capPSM()
        #expect(psm?.rawValue == replacement.rawValue)
      })
    #expect(staleReads.load(ordering: .relaxed) == 1)
  }

  /// The stale handle stays the only PSM object across the reconnection (bluetoothd's cache
  /// matched the peripheral's hash: lab, 2026-12-05, l2cap suite "absent PSM"): the error says
  /// so and how to clear the cache, and nothing is removed.
  @Test func aHandleStaleAfterReconnectingIsExplained() async throws {
    let reads = Atomic(0)
    try await Self.withPeripheral(
      reading: { _ in
        reads.add(1, ordering: .relaxed)
        throw DBusError.remote(
          name: "org.bluez.Error.Failed", message: "Operation failed with ATT error: 0x01")
      },
      then: { peripheral in
        let error = await #expect(throws: BluetoothError.self) {
          _ = try await peripheral.l2capPSM()
        }
        #expect(error?.message.contains("ATT error: 0x01") == true)
        #expect(error?.message.contains("bluetoothctl remove 00:AA:01:01:00:01") == true)
      })
    #expect(reads.load(ordering: .relaxed) == 2)
  }

  @Test func anotherReadErrorIsNotRetried() async throws {
    let reads = Atomic(0)
    try await Self.withPeripheral(
      reading: { _ in
        reads.add(1, ordering: .relaxed)
        throw DBusError.remote(name: "org.bluez.Error.NotPermitted", message: "Read not permitted")
      },
      then: { peripheral in
        await #expect(throws: BluetoothError.self) { _ = try await peripheral.l2capPSM() }
      })
    #expect(reads.load(ordering: .relaxed) == 1)
  }
}
