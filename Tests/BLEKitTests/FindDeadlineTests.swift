import BlueZ
import Bluetooth
import Synchronization
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
}
