// SightingTable: a monitor's per-ID statistics in bounded memory: at most `capacity` IDs (the
// least recently seen is evicted to make room), counts of malformed payloads by reason.

import BLEKit

/// The statistics of a monitoring run, in memory that does not grow with its length.
///
/// Each ID keeps a ``SightingStatistics`` (counts, sums and extremes, never the sightings).
/// When a new ID arrives and the table is full, the ID seen least recently is evicted; the
/// totals still count its sightings, and ``evictedIDs`` says how many went.
public struct SightingTable<Instant: InstantProtocol>: Sendable
where Instant.Duration == Duration, Instant: Sendable {
  /// One ID's row.
  public struct Entry: Sendable {
    /// The ID (hex bytes, or a device address in service mode).
    public let id: String
    /// Its statistics.
    public internal(set) var statistics: SightingStatistics<Instant>
    /// The address it was last heard from.
    public internal(set) var lastAddress: String
  }

  /// The most IDs kept at once.
  public let capacity: Int
  /// Sightings counted, evicted IDs' included.
  public private(set) var sightings = 0
  /// Malformed payloads skipped, by reason.
  public private(set) var malformed: [MalformedPayload.Reason: Int] = [:]
  /// IDs evicted to make room.
  public private(set) var evictedIDs = 0
  private var rows: [String: Entry] = [:]

  /// Creates an empty table holding at most `capacity` IDs (at least 1).
  public init(capacity: Int = 4096) {
    self.capacity = Swift.max(1, capacity)
  }

  /// IDs currently in the table.
  public var count: Int { rows.count }

  /// Every malformed payload skipped.
  public var malformedTotal: Int { malformed.values.reduce(0, +) }

  /// The row of an ID, if it is in the table.
  public subscript(id: String) -> Entry? { rows[id] }

  /// Counts a sighting; returns `true` when the ID is new to the table.
  @discardableResult
  public mutating func record(id: String, at time: Instant, rssi: Int?, address: String) -> Bool {
    sightings += 1
    if var row = rows[id] {
      rows[id] = nil  // keep the value uniquely referenced while it changes
      row.statistics.record(at: time, rssi: rssi)
      row.lastAddress = address
      rows[id] = row
      return false
    }
    if rows.count >= capacity, let oldest = rows.values.min(by: Self.seenEarlier) {
      rows[oldest.id] = nil
      evictedIDs += 1
    }
    rows[id] = Entry(
      id: id, statistics: SightingStatistics(at: time, rssi: rssi), lastAddress: address)
    return true
  }

  /// Counts a malformed payload.
  public mutating func recordMalformed(_ payload: MalformedPayload) {
    malformed[payload.reason, default: 0] += 1
  }

  /// The rows, most seen first (ties by ID).
  public var entries: [Entry] {
    rows.values.sorted { a, b in
      a.statistics.count != b.statistics.count
        ? a.statistics.count > b.statistics.count : a.id < b.id
    }
  }

  private static func seenEarlier(_ a: Entry, _ b: Entry) -> Bool {
    a.statistics.lastSeen != b.statistics.lastSeen
      ? a.statistics.lastSeen < b.statistics.lastSeen : a.id < b.id
  }
}
