// The app's BLE logic: find a heart-rate sensor close enough, connect, read where it is worn,
// follow its measurements, and say when it is lost.
import BLEKit

/// What the monitor reports, in order.
public enum MonitorEvent: Sendable, Equatable {
  /// Connected to the sensor at this address.
  case connected(String)
  /// Where the sensor is worn (Body Sensor Location), or `nil` when it would not say.
  case location(String?)
  /// A Heart Rate Measurement, in beats per minute.
  case heartRate(Int)
  /// The sensor went away (out of range, switched off); the monitor has stopped.
  case lost
}

/// Follows one heart-rate sensor.
public struct HeartRateMonitor: Sendable {
  public static let service = BluetoothUUID(uint16: 0x180D)
  public static let measurement = BluetoothUUID(uint16: 0x2A37)
  public static let bodySensorLocation = BluetoothUUID(uint16: 0x2A38)
  static let locations = ["other", "chest", "wrist", "finger", "hand", "ear lobe", "foot"]

  /// Sensors heard weaker than this are skipped (too far away to be the user's own).
  public var minimumRSSI: Int

  public init(minimumRSSI: Int = -80) { self.minimumRSSI = minimumRSSI }

  /// Scans, connects to the first sensor heard at `minimumRSSI` or stronger, and reports
  /// what happens until `measurements` values have come or the sensor is lost.
  public func run(
    on central: CentralManager, measurements: Int, report: @Sendable (MonitorEvent) -> Void
  ) async throws {
    var found: Discovery?
    let scan = try await central.scan(
      ScanOptions(services: [Self.service], allowDuplicates: true))
    for try await discovery in scan where (discovery.rssi ?? -127) >= minimumRSSI {
      found = discovery
      break
    }
    guard let found else { return }
    let peripheral = try await central.connect(to: found.peripheral, timeout: .seconds(10))
    report(.connected(found.address.rawValue))
    guard let service = try await peripheral.services([Self.service]).first else {
      throw BluetoothError(.attributeNotFound, "no Heart Rate service")
    }
    let characteristics = try await peripheral.characteristics(for: service)
    if let location = characteristics.first(where: { $0.uuid == Self.bodySensorLocation }) {
      // A sensor may refuse the read (it wants pairing): the monitor goes on without it.
      let value = try? await peripheral.readValue(for: location)
      report(
        .location(
          value?.first.map {
            Self.locations.indices.contains(Int($0)) ? Self.locations[Int($0)] : "unknown"
          }))
    }
    guard let measurement = characteristics.first(where: { $0.uuid == Self.measurement }) else {
      throw BluetoothError(.attributeNotFound, "no Heart Rate Measurement")
    }
    let values = try await peripheral.notifications(for: measurement)
    var count = 0
    do {
      for try await value in values where value.count >= 2 {
        // Flags bit 0: the rate is one byte (0) or two, little-endian (1).
        let wide = value[0] & 1 == 1 && value.count >= 3
        report(.heartRate(wide ? Int(value[1]) | Int(value[2]) << 8 : Int(value[1])))
        count += 1
        if count == measurements { break }
      }
    } catch let error as BluetoothError where error.code == .disconnected {
      report(.lost)
      return
    }
    await values.stop()
    await peripheral.disconnectOnExit()
  }
}
