import BLEKit
import BLEKitTesting
import HeartRateApp
import Synchronization
import Testing

// The app's BLE logic against a simulated sensor: no radio, no bluetoothd, no sleeps.
// The time limit turns an app that waits forever into a failed test.
@Suite(.timeLimit(.minutes(1))) struct HeartRateMonitorTests {
  /// A chest strap: Heart Rate service with Measurement (notify) and Body Sensor Location.
  static func strap(_ address: String, rssi: Int = -50) throws -> SimulatedPeripheral {
    SimulatedPeripheral(
      address: try BluetoothAddress(address),
      advertisement: SimulatedAdvertisement(
        name: "Strap", serviceUUIDs: [HeartRateMonitor.service], rssi: rssi),
      services: [
        SimulatedService(
          uuid: HeartRateMonitor.service,
          characteristics: [
            SimulatedCharacteristic(uuid: HeartRateMonitor.measurement, properties: [.notify]),
            SimulatedCharacteristic(
              uuid: HeartRateMonitor.bodySensorLocation, properties: [.read], value: [1]),
          ])
      ])
  }

  /// Runs the monitor against `sensors` while `script` plays the sensors' side; returns what
  /// the monitor reported.
  static func run(
    _ sensors: [SimulatedPeripheral], measurements: Int,
    script: @escaping @Sendable (SimulatedBluetooth) async throws -> Void
  ) async throws -> [MonitorEvent] {
    let bluetooth = try await SimulatedBluetooth.start()
    defer { bluetooth.close() }
    for sensor in sensors { bluetooth.add(sensor) }
    let central = try await bluetooth.centralManager()
    let events = Mutex<[MonitorEvent]>([])
    let monitor = Task {
      try await HeartRateMonitor().run(on: central, measurements: measurements) { event in
        events.withLock { $0.append(event) }
      }
    }
    do {
      try await script(bluetooth)
    } catch {
      // The sensor's side waited in vain: stop the monitor, and fail with what it waited for.
      monitor.cancel()
      _ = await monitor.result
      await central.close()
      throw error
    }
    try await monitor.value
    await central.close()
    return events.withLock { $0 }
  }

  @Test func readsTheLocationAndFollowsTheHeartRate() async throws {
    let strap = try Self.strap("00:11:22:33:44:55")
    let events = try await Self.run([strap], measurements: 3) { _ in
      try await strap.waitUntilSubscribed(to: HeartRateMonitor.measurement)
      try strap.notify([0x00, 72], for: HeartRateMonitor.measurement)
      try strap.notify([0x01, 0x2C, 0x01], for: HeartRateMonitor.measurement)  // 300, 16-bit
      try strap.notify([0x00, 75], for: HeartRateMonitor.measurement)
    }
    #expect(
      events == [
        .connected("00:11:22:33:44:55"), .location("chest"), .heartRate(72), .heartRate(300),
        .heartRate(75),
      ])
    #expect(!strap.isConnected)
  }

  @Test func skipsAFarSensorUntilItComesCloser() async throws {
    // The far one is heard first: a monitor that ignored the RSSI would take it.
    let far = try Self.strap("00:11:22:33:44:66", rssi: -95)
    let near = try Self.strap("00:11:22:33:44:67", rssi: -90)
    let events = try await Self.run([far, near], measurements: 1) { bluetooth in
      try await bluetooth.waitUntilDiscovering()
      near.setRSSI(-60)
      try await near.waitUntilSubscribed(to: HeartRateMonitor.measurement)
      try near.notify([0x00, 64], for: HeartRateMonitor.measurement)
    }
    #expect(events == [.connected("00:11:22:33:44:67"), .location("chest"), .heartRate(64)])
    #expect(far.connectionCount == 0)
  }

  @Test func goesOnWithoutTheLocationWhenTheSensorWantsPairing() async throws {
    let strap = try Self.strap("00:11:22:33:44:77")
    strap.fail(HeartRateMonitor.bodySensorLocation, with: .insufficientEncryption)
    let events = try await Self.run([strap], measurements: 1) { _ in
      try await strap.waitUntilSubscribed(to: HeartRateMonitor.measurement)
      try strap.notify([0x00, 80], for: HeartRateMonitor.measurement)
    }
    #expect(events == [.connected("00:11:22:33:44:77"), .location(nil), .heartRate(80)])
  }

  @Test func reportsALostSensor() async throws {
    let strap = try Self.strap("00:11:22:33:44:88")
    let events = try await Self.run([strap], measurements: 10) { _ in
      try await strap.waitUntilSubscribed(to: HeartRateMonitor.measurement)
      try strap.notify([0x00, 90], for: HeartRateMonitor.measurement)
      strap.vanish()
    }
    #expect(events == [.connected("00:11:22:33:44:88"), .location("chest"), .heartRate(90), .lost])
  }
}
