// SightingStatistics: per-advertiser counts for a contact monitor (FolkBears', `blekit
// monitor`): times seen, first and last seen, RSSI min/mean/max, sightings per minute, in
// constant memory however long the scan runs.

import BLEKit

/// Running statistics of the sightings of one advertiser (or one decoded ID).
///
/// Memory is constant: only counts, sums and extremes are kept, never the sightings. An
/// unknown RSSI (127 or absent, see `RSSIFilter`) counts as a sighting but not in the RSSI
/// figures.
public struct SightingStatistics<Instant: InstantProtocol>: Sendable
where Instant.Duration == Duration, Instant: Sendable {
  /// How many times the advertiser was seen.
  public private(set) var count = 0
  /// When it was first seen.
  public let firstSeen: Instant
  /// When it was last seen.
  public private(set) var lastSeen: Instant
  /// The weakest known RSSI, in dBm.
  public private(set) var minimumRSSI: Int?
  /// The strongest known RSSI, in dBm.
  public private(set) var maximumRSSI: Int?
  /// How many sightings had a known RSSI.
  public private(set) var knownRSSICount = 0
  private var rssiSum = 0

  /// Starts the statistics with a first sighting.
  public init(at time: Instant, rssi: Int?) {
    firstSeen = time
    lastSeen = time
    record(at: time, rssi: rssi)
  }

  /// Adds a sighting.
  public mutating func record(at time: Instant, rssi: Int?) {
    count += 1
    if time > lastSeen { lastSeen = time }
    guard let rssi, RSSIFilter.isKnown(rssi) else { return }
    knownRSSICount += 1
    rssiSum += rssi
    minimumRSSI = Swift.min(minimumRSSI ?? rssi, rssi)
    maximumRSSI = Swift.max(maximumRSSI ?? rssi, rssi)
  }

  /// The mean of the known RSSI values, in dBm.
  public var meanRSSI: Double? {
    knownRSSICount == 0 ? nil : Double(rssiSum) / Double(knownRSSICount)
  }

  /// Sightings per minute over `window` (e.g. the time since the scan started); `nil` for
  /// an empty window.
  public func sightingsPerMinute(over window: Duration) -> Double? {
    let seconds = window.secondsValue
    guard seconds > 0 else { return nil }
    return Double(count) * 60 / seconds
  }
}

extension Duration {
  /// The duration in seconds, as a floating-point number.
  var secondsValue: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
