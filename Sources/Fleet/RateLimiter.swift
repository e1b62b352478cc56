// RateLimiter: per-device publish-on-change-or-every-N-seconds, in bounded memory.

/// Decides, per key (a device address or an ID), whether a report is worth publishing: the
/// first one is; later ones when their content changed, their RSSI moved by at least
/// ``rssiDelta`` dB, or ``interval`` passed since the key's last publication.
///
/// At most ``capacity`` keys are remembered; the one published longest ago is forgotten first
/// (its next report is then published as new).
public struct RateLimiter<Instant: InstantProtocol>: Sendable
where Instant.Duration == Duration, Instant: Sendable {
  private struct Entry: Sendable {
    var published: Instant
    var fingerprint: Int
    var rssi: Int?
  }

  /// The longest time between two publications of an unchanged key; `.zero` publishes every
  /// report.
  public let interval: Duration
  /// The RSSI change, in dB, that counts as a change; `nil` ignores RSSI.
  public let rssiDelta: Int?
  /// The most keys remembered.
  public let capacity: Int
  /// Reports held back so far.
  public private(set) var suppressed = 0
  private var entries: [String: Entry] = [:]

  /// Creates a limiter.
  public init(interval: Duration, rssiDelta: Int? = 5, capacity: Int = 4096) {
    self.interval = interval
    self.rssiDelta = rssiDelta
    self.capacity = Swift.max(1, capacity)
  }

  /// Keys remembered.
  public var count: Int { entries.count }

  /// Whether to publish a report of `key` whose content (without time and RSSI) hashes to
  /// `fingerprint`; records the publication when the answer is yes.
  public mutating func shouldPublish(
    _ key: String, fingerprint: Int, rssi: Int?, at now: Instant
  ) -> Bool {
    if let entry = entries[key] {
      let changed =
        entry.fingerprint != fingerprint
        || rssiMoved(from: entry.rssi, to: rssi)
        || entry.published.duration(to: now) >= interval
      guard changed else {
        suppressed += 1
        return false
      }
    } else if entries.count >= capacity,
      let oldest = entries.min(by: { $0.value.published < $1.value.published })?.key
    {
      entries[oldest] = nil
    }
    entries[key] = Entry(published: now, fingerprint: fingerprint, rssi: rssi)
    return true
  }

  private func rssiMoved(from old: Int?, to new: Int?) -> Bool {
    guard let rssiDelta else { return false }
    switch (old, new) {
    case (nil, nil): return false
    case (let old?, let new?): return abs(old - new) >= rssiDelta
    default: return true
    }
  }
}
