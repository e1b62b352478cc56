// How a scan listens: active discovery (scan requests) or passive advertisement monitoring.

/// How a scan listens for advertisements (``ScanOptions/mode``).
///
/// - ``active``: bluetoothd's discovery (`Adapter1.StartDiscovery`). The controller sends scan
///   requests, so scan responses (often the name) arrive, and every advertiser is heard.
/// - ``passive``: an advertisement monitor (`AdvertisementMonitorManager1`). The controller
///   only listens, sends nothing, and bluetoothd reports the advertisers whose data matches
///   patterns derived from the filters: a company ID in ``ScanOptions/manufacturerIDs``, a
///   service in ``ScanOptions/services`` (16-, 32- or 128-bit, as the first UUID of its list
///   or at the start of its service data), or, without either filter, any advertisement that
///   carries the flags field (connectable and discoverable advertisers do; a broadcaster
///   without flags is not matched). bluetoothd offers the monitor interface only with its
///   experimental interfaces on (`bluetoothd --experimental`, BlueZ 5.66); without them the
///   scan fails with ``BluetoothError/Code/passiveScanUnavailable`` and never falls back to
///   active scanning.
public struct ScanMode: Sendable, Hashable, CustomStringConvertible {
  /// Whether the scan is passive.
  public let isPassive: Bool
  /// Passive scans only: a found peripheral counts as lost after this long unheard (at or
  /// above ``ScanOptions/rssi``'s minimum, when set), and is reported again when heard again
  /// (BlueZ's `RSSILowTimeout`, 1 to 300 s). `nil`: bluetoothd's default.
  public let lostAfter: Duration?

  /// Active discovery (the default).
  public static let active = ScanMode(isPassive: false, lostAfter: nil)
  /// Passive monitoring with bluetoothd's default timeouts.
  public static let passive = ScanMode(isPassive: true, lostAfter: nil)

  /// Passive monitoring; a found peripheral counts as lost after `lostAfter` unheard.
  public static func passive(lostAfter: Duration) -> ScanMode {
    ScanMode(isPassive: true, lostAfter: lostAfter)
  }

  public var description: String { isPassive ? "passive" : "active" }
}
