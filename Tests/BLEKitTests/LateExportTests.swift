import BlueZ
import Bluetooth
import DBus
import TestSupport
import Testing

// GATT objects that bluetoothd exports after ServicesResolved (a known device whose database
// changed): a lookup by UUID waits for them; a UUID the device lacks is still reported soon.
@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct LateExportTests {
  static let heartRate = BluetoothUUID(uint16: 0x180D)
  static let measurement = BluetoothUUID(uint16: 0x2A37)

  /// Exports a heart-rate service with its measurement characteristic under the fixture's
  /// device, `after` from now, as bluetoothd does once it has read the changed database.
  static func exportHeartRate(on bluez: FakeBlueZObjects, after delay: Duration) -> Task<
    Void, any Error
  > {
    Task {
      try await Task.sleep(for: delay)
      let service = RemoteGattFixture.device.appending("service0020")
      try bluez.connection.export(
        ExportedObject(interfaces: [
          FakeBlueZObjects.interface(
            GattService1.interface,
            [
              "UUID": .string(heartRate.uuidString),
              "Device": .objectPath(RemoteGattFixture.device), "Primary": .bool(true),
            ])
        ]), at: service)
      try bluez.connection.export(
        ExportedObject(interfaces: [
          FakeBlueZObjects.interface(
            GattCharacteristic1.interface,
            [
              "UUID": .string(measurement.uuidString), "Service": .objectPath(service),
              "Flags": .strings(["notify"]),
            ])
        ]), at: service.appending("char0021"))
    }
  }

  // The two tests below export 200 ms after the lookup starts, as bluetoothd does, and let the
  // lookup wait 2 s of quiet instead of 300 ms: with 300 ms, a run of the whole suite on a
  // loaded 2-core machine (rehearsal 13, 2026-12-05) woke the exporting task late enough for
  // the lookup to give up first. What they check is that an export arriving while the lookup
  // waits is found; how long bluetoothd takes is the product's 300 ms, not theirs.
  static let patient = Peripheral.ExportWait(quiet: .seconds(2), limit: .seconds(3))

  /// `peripheral` with lookups that wait as `wait` says.
  static func waiting(_ wait: Peripheral.ExportWait, _ peripheral: Peripheral) -> Peripheral {
    Peripheral(identifier: peripheral.identifier, manager: peripheral.manager, exportWait: wait)
  }

  @Test func aCharacteristicExportedLateIsFound() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let export = Self.exportHeartRate(on: bluez, after: .milliseconds(200))
      let found = try await Self.waiting(Self.patient, peripheral).characteristic(
        Self.measurement)
      #expect(found.uuid == Self.measurement)
      try await export.value
    }
  }

  @Test func aServiceExportedLateIsFound() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let export = Self.exportHeartRate(on: bluez, after: .milliseconds(200))
      let services = try await Self.waiting(Self.patient, peripheral).services([Self.heartRate])
      #expect(services.map(\.uuid) == [Self.heartRate])
      let characteristics = try await peripheral.characteristics(
        [Self.measurement], for: try #require(services.first))
      #expect(characteristics.map(\.uuid) == [Self.measurement])
      try await export.value
    }
  }

  /// All services (an explore, a clone): the list bluetoothd has at ServicesResolved may lack
  /// services it exports just after; without the wait, this found only the fixture's own.
  @Test func allServicesIncludeOneExportedLate() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let export = Self.exportHeartRate(on: bluez, after: .milliseconds(200))
      let services = try await Self.waiting(Self.patient, peripheral).services()
      #expect(services.map(\.uuid).contains(Self.heartRate))
      try await export.value
    }
  }

  @Test func aMissingCharacteristicIsReportedOnceTheObjectsAreQuiet() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { _, peripheral, _, _ in
      let clock = ContinuousClock()
      let start = clock.now
      await #expect(throws: BluetoothError.self) {
        try await peripheral.characteristic(Self.measurement)
      }
      let waited = clock.now - start
      #expect(waited >= Peripheral.ExportWait.bluetoothd.quiet!)
      #expect(waited < Peripheral.ExportWait.bluetoothd.limit)
    }
  }
}
