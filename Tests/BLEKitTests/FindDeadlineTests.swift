import BlueZ
import Bluetooth
import Synchronization
import TestSupport
import Testing

// find(_:timeout:) against a stand-in bluetoothd whose StartDiscovery reply never comes: the
// timeout bounds the whole search, the scan's start included; and a start whose reply is lost
// goes on once the adapter reports Discovering.
@testable import BLEKit

@Suite struct FindDeadlineTests {
  @Test func aStartThatIsNeverAnsweredEndsAtTheFindsTimeout() async throws {
    try await withFakeBlueZ { bluez, central in
      bluez.record.answersStart.withLock { $0 = false }
      let target = PeripheralTarget.address(try BluetoothAddress("00:AA:01:01:00:07"))
      let started = ContinuousClock.now
      var code: BluetoothError.Code?
      do throws(BluetoothError) {
        _ = try await central.find(target, timeout: .seconds(2))
      } catch {
        code = error.code
      }
      let elapsed = ContinuousClock.now - started
      // Before, the start alone could take its reply wait and the Discovering wait (25 s).
      #expect(code == .timeout)
      #expect(elapsed < .seconds(8), "find took \(elapsed)")
      #expect(bluez.count("StartDiscovery") >= 1)
    }
  }

  @Test func aStartWhoseReplyIsLostGoesOnOnceTheAdapterIsDiscovering() async throws {
    try await withFakeBlueZ { bluez, central in
      bluez.record.answersStart.withLock { $0 = false }
      let reporter = Task {
        while bluez.count("StartDiscovery") == 0 { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .seconds(1))
        try bluez.reportDiscovering(true)
        try await Task.sleep(for: .milliseconds(300))
        try bluez.advertise(7, uuids: [FakeScanningBlueZ.wanted])
      }
      defer { reporter.cancel() }
      let found = try await central.find(
        .address(try BluetoothAddress("00:AA:01:01:00:07")), timeout: .seconds(30))
      #expect(found.address.rawValue == "00:AA:01:01:00:07")
    }
  }

  /// A find that meets a scan already running on the manager waits for the slot to be freed
  /// (the manager wakes it when the scan's stop is through: a broken wake-up would hold it for
  /// the slot's 10 s limit and end in scanInProgress), then scans and finds.
  @Test func aFindWaitsForTheScanBeforeItAndGoesOnWhenItStops() async throws {
    try await withFakeBlueZ { bluez, central in
      let first = try await central.scan(ScanOptions())
      let target = PeripheralTarget.address(try BluetoothAddress("00:AA:01:01:00:07"))
      let finding = Task { try await central.find(target, timeout: .seconds(30)) }
      try await Task.sleep(for: .milliseconds(500))
      #expect(bluez.count("StartDiscovery") == 1)
      let stopped = ContinuousClock.now
      first.stop()
      #expect(await eventually { bluez.count("StartDiscovery") == 2 })
      try bluez.advertise(7, uuids: [])
      let found = await within(.seconds(5), Task { try? await finding.value })
      #expect(found.value??.address.rawValue == "00:AA:01:01:00:07")
      let took = ContinuousClock.now - stopped
      #expect(took < .seconds(5), "the find went on \(took) after the first scan's stop")
    }
  }

  /// find's one scan restarts every 4 s (``CentralManager/findRestart``): a device that shows
  /// up only once discovery was started a second time is found, by the same scan (one
  /// SetDiscoveryFilter per start, and every start but the first after a StopDiscovery).
  @Test func findsADeviceThatOnlyTheRestartedDiscoverySees() async throws {
    try await withFakeBlueZ { bluez, central in
      let reporter = Task {
        while bluez.count("StartDiscovery") < 2 { try await Task.sleep(for: .milliseconds(20)) }
        try bluez.advertise(7, uuids: [FakeScanningBlueZ.wanted])
      }
      defer { reporter.cancel() }
      let started = ContinuousClock.now
      let found = try await central.find(
        .address(try BluetoothAddress("00:AA:01:01:00:07")), timeout: .seconds(20))
      let elapsed = ContinuousClock.now - started
      #expect(found.address.rawValue == "00:AA:01:01:00:07")
      #expect(elapsed >= .seconds(3) && elapsed < .seconds(12), "found after \(elapsed)")
      #expect(bluez.count("StartDiscovery") == 2)
      #expect(bluez.count("SetDiscoveryFilter") == 2)
    }
  }
}
