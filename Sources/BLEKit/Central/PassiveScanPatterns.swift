// The advertisement monitor a passive scan registers: or-patterns derived from the scan's
// filters, and RSSI thresholds where BlueZ takes them.
import BlueZ
import Bluetooth

extension ScanOptions {
  /// AD types of the patterns (Core Specification Supplement, part A, section 1).
  enum ADType {
    static let flags: UInt8 = 0x01
    static let incomplete16: UInt8 = 0x02
    static let complete16: UInt8 = 0x03
    static let incomplete32: UInt8 = 0x04
    static let complete32: UInt8 = 0x05
    static let incomplete128: UInt8 = 0x06
    static let complete128: UInt8 = 0x07
    static let serviceData16: UInt8 = 0x16
    static let serviceData32: UInt8 = 0x20
    static let serviceData128: UInt8 = 0x21
    static let manufacturerData: UInt8 = 0xFF
  }

  /// The or-patterns of a passive scan, in a stable order.
  ///
  /// - A company ID: manufacturer data (0xFF) starting with the ID, little-endian.
  /// - A service UUID, in its shortest advertised form: the incomplete and the complete UUID
  ///   list of its size (0x02/0x03, 0x04/0x05, 0x06/0x07) starting with it, and service data
  ///   of its size (0x16, 0x20, 0x21), which always starts with the UUID. A pattern matches
  ///   at a fixed position, so a service that is not the first of its list is not matched.
  /// - Neither: the flags field (0x01) with any of the 16 values that have the two
  ///   "simultaneous LE and BR/EDR" bits both clear or both set (the others are not in use),
  ///   so any advertisement carrying flags matches (bluetoothd refuses an empty pattern).
  var monitorPatterns: [AdvertisementMonitor.Pattern] {
    var patterns: [AdvertisementMonitor.Pattern] = []
    for company in manufacturerIDs {
      patterns.append(
        .init(
          adType: ADType.manufacturerData,
          content: [UInt8(truncatingIfNeeded: company), UInt8(truncatingIfNeeded: company >> 8)]))
    }
    for service in services {
      let bytes = service.advertisingBytes
      let types: [UInt8] =
        switch bytes.count {
        case 2: [ADType.incomplete16, ADType.complete16, ADType.serviceData16]
        case 4: [ADType.incomplete32, ADType.complete32, ADType.serviceData32]
        default: [ADType.incomplete128, ADType.complete128, ADType.serviceData128]
        }
      for type in types { patterns.append(.init(adType: type, content: bytes)) }
    }
    if patterns.isEmpty {
      patterns = (Array(0x00...0x07) + Array(0x18...0x1F)).map {
        .init(adType: ADType.flags, content: [UInt8($0)])
      }
    }
    return patterns
  }

  /// The most patterns one monitor may hold. The kernel takes 16 (`max_num_patterns` of Read
  /// Advertisement Monitor Features, Linux 6.1), but bluetoothd 5.66 computes the length of
  /// its Add Adv Patterns Monitor command in a byte: with 34 bytes per pattern, 8 or more
  /// patterns wrap it, the kernel answers Invalid Parameters, bluetoothd releases the monitor
  /// and then aborts while removing it. So patterns are spread over several monitors of one
  /// registration, 7 each (the kernel takes up to 32 monitors).
  static let patternsPerMonitor = 7

  /// The monitors a passive scan registers: ``monitorPatterns``, at most
  /// ``patternsPerMonitor`` each, and RSSI thresholds only when
  /// asked for. With an RSSI minimum, a peripheral is found when heard at or above it and lost
  /// after ``ScanMode/lostAfter`` below it; with only `lostAfter`, any RSSI counts (-127). An
  /// unknown RSSI (127) is above every threshold for bluetoothd; ``RSSIFilter``'s policy for it
  /// applies again here, after bluetoothd.
  var advertisementMonitors: [AdvertisementMonitor] { monitors(holding: monitorPatterns) }

  /// The monitors for an adapter whose matching bluetoothd does itself (no
  /// `controller-patterns` in the manager's `SupportedFeatures`). From BlueZ 5.69 on
  /// (bluez/bluez#652, #901, #2110; seen with 5.82), bluetoothd's own matcher compares a
  /// service-data pattern with the data after the UUID, and a UUID-list pattern with nothing,
  /// so a service's patterns never match there. With a service filter, such a scan also
  /// carries the flags patterns (any advertisement with flags) and the scan's own filter,
  /// applied to every device found, keeps only the service's advertisers. A controller that
  /// matches by itself reads the raw advertisement, where the service patterns hold.
  func advertisementMonitors(matchedByBluetoothd: Bool) -> [AdvertisementMonitor] {
    guard matchedByBluetoothd, !services.isEmpty else { return advertisementMonitors }
    return monitors(holding: monitorPatterns + ScanOptions(mode: mode).monitorPatterns)
  }

  /// `patterns` spread over monitors of ``patternsPerMonitor`` each, every one with the RSSI
  /// settings of ``advertisementMonitor``.
  private func monitors(holding patterns: [AdvertisementMonitor.Pattern]) -> [AdvertisementMonitor]
  {
    stride(from: 0, to: patterns.count, by: Self.patternsPerMonitor).map { start in
      var monitor = advertisementMonitor
      monitor.patterns = Array(
        patterns[start..<min(start + Self.patternsPerMonitor, patterns.count)])
      return monitor
    }
  }

  /// One monitor with every pattern and the RSSI settings (see ``advertisementMonitors``).
  var advertisementMonitor: AdvertisementMonitor {
    var monitor = AdvertisementMonitor(patterns: monitorPatterns)
    let lostAfter = mode.lostAfter.map { limit in
      UInt16(clamping: max(1, min(300, limit.components.seconds)))
    }
    if let minimum = rssi.minimum {
      monitor.rssiHighThreshold = Int16(minimum)
      monitor.rssiLowThreshold = Int16(minimum)
      monitor.rssiHighTimeout = 1
      monitor.rssiLowTimeout = lostAfter
    } else if let lostAfter {
      monitor.rssiLowThreshold = Int16(RSSIFilter.validRange.lowerBound)
      monitor.rssiHighThreshold = Int16(RSSIFilter.validRange.lowerBound)
      monitor.rssiHighTimeout = 1
      monitor.rssiLowTimeout = lostAfter
    }
    // Every advertisement of a found peripheral, as active scans with duplicates give them.
    if allowDuplicates, monitor.rssiLowThreshold != nil { monitor.rssiSamplingPeriod = 0 }
    return monitor
  }
}
