import BlueZ
import Bluetooth
import DBus
import Synchronization
import TestSupport
import Testing

// The wait for bluetoothd's late GATT exports follows the object tree's changes: a lookup runs
// again only when the device's services or characteristics change, the wait ends as soon as
// the one looked for is exported or the device disconnects, and it ends at its quiet period or
// its limit when nothing more comes. The stand-in bluetoothd exports on a private bus.
@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct ExportWaitTests {
  static let heartRate = LateExportTests.heartRate
  static let measurement = LateExportTests.measurement
  static let clock = ContinuousClock()

  /// Exports one more characteristic (an unrelated UUID) under the fixture's service every
  /// `interval`, until cancelled.
  static func keepExporting(on bluez: FakeBlueZObjects, every interval: Duration) -> Task<
    Void, Never
  > {
    Task {
      var handle = 0x0100
      while !Task.isCancelled {
        try? await Task.sleep(for: interval)
        handle += 1
        try? bluez.connection.export(
          ExportedObject(interfaces: [
            FakeBlueZObjects.interface(
              GattCharacteristic1.interface,
              [
                "UUID": .string(BluetoothUUID(uint16: 0x2A19).uuidString),
                "Service": .objectPath(RemoteGattFixture.service), "Flags": .strings(["read"]),
              ])
          ]), at: RemoteGattFixture.service.appending("char\(String(handle, radix: 16))"))
      }
    }
  }

  @Test func aLookupRunsAgainOnlyWhenTheDevicesObjectsChange() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let export = LateExportTests.exportHeartRate(on: bluez, after: .milliseconds(600))
      var lookups = 0
      let start = Self.clock.now
      let found = await peripheral.lookingUntilExported(
        {
          lookups += 1
          return peripheral.resolvedServices([Self.heartRate])
        }, isComplete: { !$0.isEmpty },
        wait: Peripheral.ExportWait(quiet: nil, limit: .seconds(30)))
      let waited = Self.clock.now - start
      #expect(found.map(\.uuid) == [Self.heartRate])
      // One look before the wait, one once changes are heard, one at the service's export;
      // none on a timer (a 50 ms poll looked about 12 times in these 600 ms).
      #expect(lookups == 3)
      // Ended by the export, long before the limit (bounds loose for a loaded machine).
      #expect(waited < .seconds(15))
      try await export.value
    }
  }

  @Test func theWaitEndsAtItsLimitWhenNothingComes() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { _, peripheral, _, _ in
      var lookups = 0
      let start = Self.clock.now
      let found = await peripheral.lookingUntilExported(
        {
          lookups += 1
          return peripheral.resolvedServices([Self.heartRate])
        }, isComplete: { !$0.isEmpty },
        wait: Peripheral.ExportWait(quiet: nil, limit: .seconds(1)))
      let waited = Self.clock.now - start
      #expect(found.count == 0)
      #expect(lookups == 2)
      #expect(waited >= .seconds(1))
      #expect(waited < .seconds(10))
    }
  }

  @Test func changesThatKeepComingEndAtTheLimit() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let exporter = Self.keepExporting(on: bluez, every: .milliseconds(100))
      defer { exporter.cancel() }
      var lookups = 0
      let start = Self.clock.now
      let found = await peripheral.lookingUntilExported(
        {
          lookups += 1
          return peripheral.resolvedServices(nil).flatMap {
            peripheral.resolvedCharacteristics([Self.measurement], of: $0)
          }
        }, isComplete: { !$0.isEmpty },
        wait: Peripheral.ExportWait(quiet: .milliseconds(1500), limit: .seconds(3)))
      let waited = Self.clock.now - start
      #expect(found.count == 0)
      // Each export restarted the quiet period, so the limit ended the wait.
      #expect(waited >= .seconds(3))
      #expect(waited < .seconds(12))
      #expect(lookups > 2)
    }
  }

  @Test func theQuietPeriodCountsFromTheLastChange() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      // The export comes after the wait's first two lookups (before and after it subscribed),
      // not after a fixed time: on a loaded machine 400 ms was not always enough for them.
      let seen = LookupCount()
      let export = Task {
        while seen.value.load(ordering: .acquiring) < 2 {
          try await Task.sleep(for: .milliseconds(10))
        }
        try bluez.connection.export(
          ExportedObject(interfaces: [
            FakeBlueZObjects.interface(
              GattCharacteristic1.interface,
              [
                "UUID": .string(BluetoothUUID(uint16: 0x2A19).uuidString),
                "Service": .objectPath(RemoteGattFixture.service), "Flags": .strings(["read"]),
              ])
          ]), at: RemoteGattFixture.service.appending("char0101"))
      }
      var lookups = 0
      let start = Self.clock.now
      let found = await peripheral.lookingUntilExported(
        {
          lookups += 1
          seen.value.store(lookups, ordering: .releasing)
          return peripheral.resolvedServices(nil).flatMap {
            peripheral.resolvedCharacteristics([Self.measurement], of: $0)
          }
        }, isComplete: { !$0.isEmpty },
        wait: Peripheral.ExportWait(quiet: .seconds(1), limit: .seconds(10)))
      let waited = Self.clock.now - start
      #expect(found.count == 0)
      // The export, then a quiet second.
      #expect(waited >= .seconds(1))
      #expect(waited < .seconds(10))
      #expect(lookups == 3)
      try await export.value
    }
  }

  @Test func aDisconnectEndsTheWait() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      let disconnect = Task {
        try await Task.sleep(for: .milliseconds(300))
        try bluez.connection.emitPropertiesChanged(
          path: RemoteGattFixture.device, interface: Device1.interface,
          changed: ["Connected": .bool(false), "ServicesResolved": .bool(false)])
      }
      let start = Self.clock.now
      let found = await peripheral.lookingUntilExported(
        { peripheral.resolvedServices([Self.heartRate]) }, isComplete: { !$0.isEmpty },
        wait: Peripheral.ExportWait(quiet: nil, limit: .seconds(30)))
      let waited = Self.clock.now - start
      #expect(found.count == 0)
      #expect(waited >= .milliseconds(300))
      #expect(waited < .seconds(15))
      try await disconnect.value
    }
  }

  // TransferCentral's wait for the transfer service, which bluetoothd can export after it
  // said the services were resolved.

  /// Exports the transfer service under the fixture's device after `delay`.
  static func exportTransferService(on bluez: FakeBlueZObjects, after delay: Duration) -> Task<
    Void, any Error
  > {
    Task {
      try await Task.sleep(for: delay)
      try bluez.connection.export(
        ExportedObject(interfaces: [
          FakeBlueZObjects.interface(
            GattService1.interface,
            [
              "UUID": .string(BlekitUUID.transferService.uuidString),
              "Device": .objectPath(RemoteGattFixture.device), "Primary": .bool(true),
            ])
        ]), at: RemoteGattFixture.device.appending("service0030"))
    }
  }

  @Test func theTransferServiceExportedLateIsFound() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { bluez, peripheral, _, _ in
      // Past bluetoothd's 300 ms of quiet, within the settle time.
      let export = Self.exportTransferService(on: bluez, after: .milliseconds(1500))
      let start = Self.clock.now
      let service = try await TransferCentral(manager: peripheral.manager).transferService(
        of: peripheral)
      let waited = Self.clock.now - start
      #expect(service?.uuid == BlekitUUID.transferService)
      #expect(waited < TransferCentral.serviceSettleTime)
      try await export.value
    }
  }

  @Test func noTransferServiceEndsAtTheSettleTime() async throws {
    try await RemoteGattFixture.with(flags: ["read"]) { _, peripheral, _, _ in
      let start = Self.clock.now
      let service = try await TransferCentral(manager: peripheral.manager).transferService(
        of: peripheral)
      let waited = Self.clock.now - start
      #expect(service == nil)
      #expect(waited >= TransferCentral.serviceSettleTime)
      #expect(waited < TransferCentral.serviceSettleTime + .seconds(10))
    }
  }
}

/// How many lookups a wait has made, for a task that acts after them.
private final class LookupCount: Sendable {
  let value = Atomic(0)
}
