// The live table `blekit scan` shows on a terminal: one row per peripheral (address, name,
// RSSI, times seen, last seen), redrawn in place at a bounded rate, as seed 001 throttles its
// list.

import BLEKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Rows of discovered peripherals, shared between the scan loop and the redraw timer.
final class ScanLiveTable: Sendable {
  /// The most rows kept; further peripherals are counted, not shown.
  static let maximumRows = 256
  /// The shortest time between two redraws (4 Hz).
  static let redrawInterval: Duration = .milliseconds(250)

  struct Row: Sendable {
    var address: String
    var name: String?
    var rssi: Int?
    var seen: Int
    var lastSeen: ContinuousClock.Instant
  }

  private struct State {
    var rows: [String: Row] = [:]
    var order: [String] = []
    var notShown = 0
    var dirty = false
    var drawnLines = 0
  }

  private let state = Mutex(State())
  private let start = ContinuousClock.now

  /// Notes a discovery; the next redraw shows it.
  func note(_ discovery: Discovery) {
    let address = discovery.address.rawValue
    state.withLock { state in
      if var row = state.rows[address] {
        row.seen += 1
        row.lastSeen = discovery.timestamp
        row.rssi = discovery.rssi ?? row.rssi
        row.name = discovery.name ?? row.name
        state.rows[address] = row
      } else if state.rows.count < Self.maximumRows {
        state.rows[address] = Row(
          address: address, name: discovery.name, rssi: discovery.rssi, seen: 1,
          lastSeen: discovery.timestamp)
        state.order.append(address)
      } else {
        state.notShown += 1
      }
      state.dirty = true
    }
  }

  /// Redraws the table when something changed (call at most every ``redrawInterval``).
  func redrawIfNeeded(force: Bool = false) {
    let now = ContinuousClock.now
    let text: String? = state.withLock { state in
      guard state.dirty || force else { return nil }
      state.dirty = false
      let rows = state.order.compactMap { state.rows[$0] }
      var lines = [Self.header] + rows.map { Self.line($0, now: now) }
      if state.notShown > 0 { lines.append("(\(state.notShown) more reports not shown)") }
      // Move up over the previous drawing, then rewrite each line and clear what is left.
      let up = state.drawnLines > 0 ? "\u{1B}[\(state.drawnLines)A\r" : ""
      state.drawnLines = lines.count
      return up + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\n") + "\n\u{1B}[J"
    }
    if let text { writeStandardOutput(Array(text.utf8)) }
  }

  static let header = "ADDRESS            RSSI  SEEN  LAST    NAME"

  /// One row: address, RSSI (`?` unknown), times seen, seconds since last seen, name.
  static func line(_ row: Row, now: ContinuousClock.Instant) -> String {
    let rssi = row.rssi.map(String.init) ?? "?"
    let ago = seconds(now - row.lastSeen)
    let last = ago < 1 ? "now" : "\(Int(ago))s ago"
    return row.address.padding(18) + " " + rssi.padding(5) + " " + String(row.seen).padding(5)
      + " " + last.padding(7) + " " + (row.name.map(JSON.quoted) ?? "")
  }
}

extension String {
  fileprivate func padding(_ width: Int) -> String {
    count >= width ? self : self + String(repeating: " ", count: width - count)
  }
}
