import Bluetooth
import TestSupport
import Testing

// Reads and writes by UUID against a stand-in bluetoothd's exported GATT objects: the lookup
// in any service or in a named one, and a clear error for a UUID the peripheral lacks.
@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct PeripheralByUUIDTests {
  static let uartService = try! BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")
  static let uartRX = try! BluetoothUUID(RemoteGattFixture.uartRX)

  @Test func readsAndWritesFindTheCharacteristic() async throws {
    try await RemoteGattFixture.with(flags: ["read", "write", "write-without-response"]) {
      bluez, peripheral, remote, kept in
      #expect(try await peripheral.characteristic(Self.uartRX) == remote)
      #expect(try await peripheral.characteristic(Self.uartRX, in: Self.uartService) == remote)
      #expect(try await peripheral.readValue(of: Self.uartRX) == Array("ready".utf8))
      try await peripheral.writeValue([1, 2], to: Self.uartRX, in: Self.uartService)
      try await peripheral.writeValue([3], to: Self.uartRX, type: .withoutResponse)
      let writes = kept.writes.withLock { $0 }
      #expect(writes.map(\.0) == [[1, 2], [3]])
      #expect(writes.map(\.1) == ["request", "command"])
    }
  }

  @Test func aMissingCharacteristicIsAttributeNotFound() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { _, peripheral, _, kept in
      for (uuid, service) in [
        (BluetoothUUID(uint16: 0x2A19), nil),  // nowhere
        (Self.uartRX, BluetoothUUID(uint16: 0x180F)),  // not in that service
      ] {
        do throws(BluetoothError) {
          _ = try await peripheral.readValue(of: uuid, in: service)
          Issue.record("\(uuid) was found")
        } catch {
          #expect(error.code == .attributeNotFound)
        }
      }
      #expect(kept.writes.withLock { $0 }.isEmpty)
    }
  }
}
