// RSSIFilter: the minimum-RSSI rule for discoveries, including what to do when the RSSI is
// unknown (HCI reports 127, "not available"; BlueZ may also leave RSSI out).

/// What an RSSI threshold does with a discovery whose RSSI is unknown.
public enum UnknownRSSIPolicy: String, Hashable, Sendable, CaseIterable {
  /// An unknown RSSI passes the threshold (the default).
  case include
  /// An unknown RSSI fails the threshold.
  case exclude
}

/// A minimum-RSSI rule, such as "-50 dBm or stronger" (`try RSSIFilter(minimum: -50)`).
///
/// **Unknown RSSI.** HCI defines an RSSI of `127` as "RSSI is not available" (Core
/// Specification, Vol 4, Part E, 7.7.65.2), and BlueZ's `Device1.RSSI` property can be absent.
/// Values outside -127...20 dBm are reserved by HCI and are treated as unknown too.
///
/// Policy decision: **with a threshold set, an unknown RSSI passes by default**
/// (`UnknownRSSIPolicy.include`), and `.exclude` makes it fail. Reasons: many adapters report
/// 127 for every device, so a default of "exclude"
/// would make `--min-rssi` find nothing there, silently; and an unknown signal is not evidence
/// of a weak one. A tool should say when it let a device through on an unknown RSSI (see
/// `Decision.passedUnknown`). Without a threshold every discovery passes.
public struct RSSIFilter: Hashable, Sendable {
  /// The RSSI value HCI uses for "not available".
  public static let unavailable = 127

  /// The range a threshold must lie in, in dBm (HCI's RSSI range).
  public static let validRange = -127...20

  /// The minimum RSSI in dBm, or `nil` for no threshold.
  public let minimum: Int?

  /// What happens to an unknown RSSI when a threshold is set.
  public let unknownPolicy: UnknownRSSIPolicy

  /// A filter that lets everything through.
  public static let none = RSSIFilter(validated: nil, unknownPolicy: .include)

  /// Creates a filter.
  ///
  /// - Throws: `RSSIFilter.RangeError` when `minimum` is outside -127...20 dBm.
  public init(minimum: Int?, unknownPolicy: UnknownRSSIPolicy = .include) throws(RangeError) {
    if let minimum, !Self.validRange.contains(minimum) {
      throw RangeError(value: minimum)
    }
    self.init(validated: minimum, unknownPolicy: unknownPolicy)
  }

  private init(validated minimum: Int?, unknownPolicy: UnknownRSSIPolicy) {
    self.minimum = minimum
    self.unknownPolicy = unknownPolicy
  }

  /// Whether a reported RSSI is a real measurement: present and within -127...20 dBm.
  public static func isKnown(_ rssi: Int?) -> Bool {
    guard let rssi else { return false }
    return validRange.contains(rssi)
  }

  /// The outcome of applying the filter to one RSSI.
  public enum Decision: Hashable, Sendable {
    /// No threshold is set.
    case noThreshold
    /// The RSSI is known and at or above the threshold.
    case passed(rssi: Int)
    /// The RSSI is unknown and the policy lets it through.
    case passedUnknown
    /// The RSSI is known and below the threshold.
    case belowThreshold(rssi: Int, minimum: Int)
    /// The RSSI is unknown and the policy excludes it.
    case excludedUnknown

    /// Whether the discovery should be kept.
    public var passes: Bool {
      switch self {
      case .noThreshold, .passed, .passedUnknown: true
      case .belowThreshold, .excludedUnknown: false
      }
    }
  }

  /// Applies the filter to a reported RSSI (`nil` when BlueZ reported none).
  public func evaluate(_ rssi: Int?) -> Decision {
    guard let minimum else { return .noThreshold }
    guard let rssi, Self.isKnown(rssi) else {
      return unknownPolicy == .include ? .passedUnknown : .excludedUnknown
    }
    return rssi >= minimum ? .passed(rssi: rssi) : .belowThreshold(rssi: rssi, minimum: minimum)
  }

  /// Whether a discovery with this RSSI should be kept.
  public func admits(_ rssi: Int?) -> Bool {
    evaluate(rssi).passes
  }

  /// The error thrown for a threshold outside -127...20 dBm.
  public struct RangeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The rejected threshold.
    public let value: Int

    /// Creates the error for a rejected threshold.
    public init(value: Int) { self.value = value }

    public var description: String {
      "RSSI threshold \(value) dBm is out of range: expected -127...20 dBm"
    }
  }
}
