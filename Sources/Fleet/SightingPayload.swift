// SightingPayload: the JSON a gateway publishes per sighting and per ID summary, in blekit's
// layout and in Theengs Gateway's, built from a Discovery.

import BLEKit
import Bluetooth
import JSON
import Sightings

#if canImport(Glibc)
  import Glibc
#endif

/// The wall-clock time as Unix seconds (payload timestamps).
public func fleetUnixTime() -> Double {
  var spec = timespec()
  Syscall.clock_gettime(CLOCK_REALTIME, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec / 1_000_000) / 1000
}

/// Where a payload comes from: the gateway's name and the adapter it scans with.
public struct GatewayOrigin: Sendable, Hashable {
  /// The gateway's name (a topic segment: letters, digits, `-` and `_`).
  public var gateway: String
  /// The adapter, e.g. `hci0`.
  public var adapter: String

  public init(gateway: String, adapter: String) {
    self.gateway = gateway
    self.adapter = adapter
  }
}

/// Builds payloads.
public enum SightingPayload {
  /// blekit's sighting object: every field of the report, the gateway, the adapter, the time
  /// and the gateway's sequence number (a consumer sees a gap as lost messages).
  public static func sighting(
    _ report: AdvertisementReport, id: String?, origin: GatewayOrigin, sequence: Int,
    unixTime: Double
  ) -> JSONValue {
    .object([
      .init("type", .string("sighting")),
      .init("gateway", .string(origin.gateway)),
      .init("adapter", .string(origin.adapter)),
      .init("seq", .int(sequence)),
      .init("timestamp", .number(unixTime)),
      .init("id", id.map { .string($0) } ?? .null),
      .init("address", .string(report.address)),
      .init("addressType", report.addressType.map { .string($0.rawValue) } ?? .null),
      .init("rssi", report.rssi.map { .int($0) } ?? .null),
      .init("txPower", report.txPower.map { .int($0) } ?? .null),
      .init("name", report.name.map { .string($0) } ?? .null),
      .init("serviceUUIDs", .array(report.serviceUUIDs.map { .string($0.uuidString) })),
      .init(
        "manufacturerData",
        .object(
          report.manufacturerData.sorted { $0.key < $1.key }.map {
            .init(hex4($0.key), .string(HexBytes.format($0.value)))
          })),
      .init(
        "serviceData",
        .object(
          report.serviceData.sorted { $0.key < $1.key }.map {
            .init($0.key.uuidString, .string(HexBytes.format($0.value)))
          })),
    ])
  }

  /// The periodic summary of one ID, as `blekit monitor --json` prints it at the end.
  public static func summary(
    _ entry: SightingTable<ContinuousClock.Instant>.Entry, origin: GatewayOrigin, sequence: Int,
    start: ContinuousClock.Instant, startUnix: Double, now: ContinuousClock.Instant
  ) -> JSONValue {
    let stats = entry.statistics
    func unix(_ instant: ContinuousClock.Instant) -> JSONValue {
      .number(startUnix + seconds(instant - start))
    }
    return .object([
      .init("type", .string("summary")),
      .init("gateway", .string(origin.gateway)),
      .init("adapter", .string(origin.adapter)),
      .init("seq", .int(sequence)),
      .init("timestamp", unix(now)),
      .init("id", .string(entry.id)),
      .init("address", .string(entry.lastAddress)),
      .init("count", .int(stats.count)),
      .init("firstSeen", unix(stats.firstSeen)),
      .init("lastSeen", unix(stats.lastSeen)),
      .init("rssiMin", stats.minimumRSSI.map { .int($0) } ?? .null),
      .init("rssiMean", stats.meanRSSI.map { .number($0) } ?? .null),
      .init("rssiMax", stats.maximumRSSI.map { .int($0) } ?? .null),
      .init(
        "perMinute", stats.sightingsPerMinute(over: now - start).map { .number($0) } ?? .null),
    ])
  }

  /// Theengs Gateway's BTtoMQTT object: `id` (the address), `mac_type` (0 public, 1 random),
  /// `name`, `rssi`, `txpower`, `manufacturerdata` (the company ID little-endian, then the
  /// data, as one hex string), `servicedata` and `servicedatauuid` (the first service data).
  public static func theengs(_ report: AdvertisementReport, id: String?) -> JSONValue {
    var fields: [JSONValue.Field] = [.init("id", .string(report.address))]
    if let type = report.addressType {
      fields.append(.init("mac_type", .int(type.rawValue == "random" ? 1 : 0)))
    }
    if let name = report.name { fields.append(.init("name", .string(name))) }
    if let rssi = report.rssi { fields.append(.init("rssi", .int(rssi))) }
    if let txPower = report.txPower { fields.append(.init("txpower", .int(txPower))) }
    if let (company, bytes) = report.manufacturerData.min(by: { $0.key < $1.key }) {
      let data = [UInt8(company & 0xFF), UInt8(company >> 8)] + bytes
      fields.append(.init("manufacturerdata", .string(HexBytes.format(data))))
    }
    if let (uuid, bytes) = report.serviceData.min(by: { $0.key < $1.key }) {
      fields.append(.init("servicedata", .string(HexBytes.format(bytes))))
      fields.append(.init("servicedatauuid", .string(theengsUUID(uuid))))
    }
    if !report.serviceUUIDs.isEmpty {
      fields.append(
        .init("servicesuuids", .array(report.serviceUUIDs.map { .string(theengsUUID($0)) })))
    }
    if let id { fields.append(.init("tempUserId", .string(id))) }
    return .object(fields)
  }

  /// `0x181a` for a 16-bit UUID (Theengs' form), the full UUID otherwise.
  static func theengsUUID(_ uuid: BluetoothUUID) -> String {
    let short = uuid.shortString
    return short.count == 4 ? "0x" + short.lowercased() : uuid.uuidString
  }

  static func hex4(_ value: UInt16) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: 4 - text.count) + text
  }

  static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }
}
