// What `blekit monitor` prints: a line per new ID, JSON Lines per sighting, and the summary
// (a table, or one JSON object) at the end.

import BLEKit
import JSON
import Sightings

/// The text and JSON forms of a monitoring run.
enum MonitorOutput {
  /// The clock the monitor measures with.
  typealias Table = SightingTable<ContinuousClock.Instant>

  /// How a run ended, for the summary's first line.
  struct Run {
    /// What was monitored.
    var target: MonitorTarget
    /// The adapter's name, e.g. `hci0`.
    var adapter: String
    /// When the run started.
    var start: ContinuousClock.Instant
    /// The Unix time of `start`.
    var startUnix: Double
    /// How long it ran.
    var duration: Duration
  }

  /// `new  ID  from ADDRESS`, printed the first time an ID is seen (text mode).
  static func newIDLine(id: String, address: String, target: MonitorTarget) -> String {
    switch target {
    case .service: "seen \(id)"
    case .manufacturer: "new  \(id)  from \(address)"
    }
  }

  /// The first JSON line, once discovery runs: what is monitored, where, since when.
  static func startJSON(target: MonitorTarget, adapter: String, unixTime: Double) -> String {
    JSONValue.object([
      .init("type", .string("start")),
      .init("timestamp", .number(unixTime)),
      .init("target", .string(target.description)),
      .init("adapter", .string(adapter)),
    ]).text
  }

  /// One JSON line per sighting.
  static func sightingJSON(
    id: String, address: String, rssi: Int?, count: Int, unixTime: Double
  ) -> String {
    JSONValue.object([
      .init("type", .string("sighting")),
      .init("timestamp", .number(unixTime)),
      .init("id", .string(id)),
      .init("address", .string(address)),
      .init("rssi", rssi.map { .int($0) } ?? .null),
      .init("count", .int(count)),
    ]).text
  }

  /// One JSON line per malformed payload skipped.
  static func malformedJSON(_ payload: MalformedPayload, address: String, unixTime: Double)
    -> String
  {
    JSONValue.object([
      .init("type", .string("malformed")),
      .init("timestamp", .number(unixTime)),
      .init("address", .string(address)),
      .init("reason", .string(payload.reason.rawValue)),
      .init("length", .int(payload.length)),
      .init("detail", .string(payload.detail)),
    ]).text
  }

  /// The summary as text: a header line, one row per ID, and the skipped payloads.
  static func summaryText(_ table: Table, run: Run) -> String {
    var lines: [String] = []
    let idWord = if case .service = run.target { "device" } else { "ID" }
    lines.append(
      "monitored \(run.target) on \(run.adapter) for \(oneDecimal(run.duration)) s: "
        + "\(plural(table.sightings, "sighting")), \(plural(table.count, idWord)), "
        + "\(table.malformedTotal) malformed skipped")
    if table.count > 0 {
      let width = max(idWord.count, table.entries.map(\.id.count).max() ?? 0)
      lines.append(
        pad(idWord, width) + "  " + pad("seen", 6, right: true) + "  " + pad("first", 8)
          + "  " + pad("last", 8) + "  " + pad("rssi min/mean/max", 17) + "  per min")
      for entry in table.entries {
        let stats = entry.statistics
        lines.append(
          pad(entry.id, width) + "  " + pad(String(stats.count), 6, right: true) + "  "
            + pad("+" + oneDecimal(stats.firstSeen - run.start) + "s", 8) + "  "
            + pad("+" + oneDecimal(stats.lastSeen - run.start) + "s", 8) + "  "
            + pad(rssiText(stats), 17) + "  "
            + (stats.sightingsPerMinute(over: run.duration).map(oneDecimal) ?? "-"))
      }
    }
    if table.malformedTotal > 0 {
      let parts = table.malformed.sorted { $0.key < $1.key }.map {
        "\($0.key.rawValue) \($0.value)"
      }
      lines.append("malformed payloads skipped: " + parts.joined(separator: ", "))
    }
    if table.evictedIDs > 0 {
      lines.append(
        "\(plural(table.evictedIDs, idWord)) evicted (table holds \(table.capacity)); "
          + "their sightings are in the total")
    }
    return lines.joined(separator: "\n")
  }

  /// The summary as one JSON object.
  static func summaryJSON(_ table: Table, run: Run) -> String {
    func unix(_ instant: ContinuousClock.Instant) -> JSONValue {
      .number(run.startUnix + seconds(instant - run.start))
    }
    let ids: [JSONValue] = table.entries.map { entry in
      let stats = entry.statistics
      return .object([
        .init("id", .string(entry.id)),
        .init("address", .string(entry.lastAddress)),
        .init("count", .int(stats.count)),
        .init("firstSeen", unix(stats.firstSeen)),
        .init("lastSeen", unix(stats.lastSeen)),
        .init("rssiMin", stats.minimumRSSI.map { .int($0) } ?? .null),
        .init("rssiMean", stats.meanRSSI.map { .number($0) } ?? .null),
        .init("rssiMax", stats.maximumRSSI.map { .int($0) } ?? .null),
        .init(
          "perMinute", stats.sightingsPerMinute(over: run.duration).map { .number($0) } ?? .null),
      ])
    }
    let malformed: [JSONValue.Field] = table.malformed.sorted { $0.key < $1.key }.map {
      JSONValue.Field($0.key.rawValue, .int($0.value))
    }
    return JSONValue.object([
      .init("type", .string("summary")),
      .init("target", .string(run.target.description)),
      .init("adapter", .string(run.adapter)),
      .init("start", .number(run.startUnix)),
      .init("duration", .number(seconds(run.duration))),
      .init("sightings", .int(table.sightings)),
      .init("ids", .array(ids)),
      .init("malformed", .object(malformed)),
      .init("malformedTotal", .int(table.malformedTotal)),
      .init("evictedIDs", .int(table.evictedIDs)),
    ]).text
  }

  /// `-70/-65.5/-60`, or `?` when no sighting had a known RSSI.
  static func rssiText(_ stats: SightingStatistics<ContinuousClock.Instant>) -> String {
    guard let low = stats.minimumRSSI, let mean = stats.meanRSSI, let high = stats.maximumRSSI
    else { return "?" }
    return "\(low)/\(oneDecimal(mean))/\(high)"
  }

  static func oneDecimal(_ duration: Duration) -> String { oneDecimal(seconds(duration)) }

  /// A number with one decimal, e.g. `12.5`, `-65.3`.
  static func oneDecimal(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    let sign = tenths < 0 ? "-" : ""
    return "\(sign)\(abs(tenths) / 10).\(abs(tenths) % 10)"
  }

  private static func plural(_ count: Int, _ word: String) -> String {
    "\(count) \(word)\(count == 1 ? "" : "s")"
  }

  private static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let fill = String(repeating: " ", count: max(0, width - text.count))
    return right ? fill + text : text + fill
  }
}
