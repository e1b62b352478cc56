// The live table `blekit scan` shows on a terminal: one row per peripheral (address, name,
// RSSI, times seen, last seen), redrawn in place at a bounded rate, as a phone's scanner
// throttles its list.

import BLEKit
import Dispatch
import JSON
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
  /// How often the LAST column's ages are brought up to date while rows are shown and no
  /// report comes (they are whole seconds).
  static let ageRefreshInterval: Duration = .seconds(1)

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
    /// The lines on screen, as last drawn (the cursor is on the line below them).
    var drawn: [[UInt8]] = []
    var lastDrawn: ContinuousClock.Instant?
    /// The timer of ``startRedrawing()`` (until ``stopRedrawing()``): armed only when a
    /// drawing is due (a report held back by the rate, or ages to refresh), so an idle scan
    /// wakes nothing.
    var timer: RedrawTimer?
    /// When the timer fires next (`nil`: not armed).
    var wakeAt: ContinuousClock.Instant?
  }

  /// A Dispatch timer source (safe to use from any thread).
  private final class RedrawTimer: @unchecked Sendable {
    let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "blekit.scan.table"))
  }

  private let state = Mutex(State())
  private let start = ContinuousClock.now
  private let output: @Sendable ([UInt8]) -> Void

  /// A table that draws through `output` (standard output by default).
  init(output: @escaping @Sendable ([UInt8]) -> Void = { writeStandardOutput($0) }) {
    self.output = output
  }

  /// Notes a discovery. The table is redrawn at once when the last drawing is at least
  /// ``redrawInterval`` old, so a first sighting shows without waiting for a timer tick;
  /// otherwise the next due redraw shows it.
  func note(_ discovery: Discovery) {
    note(
      address: discovery.address.rawValue, name: discovery.name, rssi: discovery.rssi,
      at: discovery.timestamp)
  }

  /// Notes one report of `address` (see ``note(_:)``).
  func note(address: String, name: String?, rssi: Int?, at timestamp: ContinuousClock.Instant) {
    state.withLock { state in
      if var row = state.rows[address] {
        row.seen += 1
        row.lastSeen = timestamp
        row.rssi = rssi ?? row.rssi
        row.name = name ?? row.name
        state.rows[address] = row
      } else if state.rows.count < Self.maximumRows {
        state.rows[address] = Row(
          address: address, name: name, rssi: rssi, seen: 1, lastSeen: timestamp)
        state.order.append(address)
      } else {
        state.notShown += 1
      }
      state.dirty = true
    }
    // The report's own time serves as "now": no second clock reading (where the clock
    // source has no vDSO fast path, as in many virtual machines, each one is a system call).
    redrawIfNeeded(now: timestamp)
    scheduleRedraw()
  }

  /// Redraws the table when something changed and the last drawing is at least
  /// ``redrawInterval`` old (or always, with `force`). ``note(_:)`` calls it, and after
  /// ``startRedrawing()`` a timer calls it when a held-back report falls due: the rate stays
  /// bounded by ``redrawInterval``.
  func redrawIfNeeded(force: Bool = false, now: ContinuousClock.Instant = .now) {
    redraw(force ? .force : .ifChanged, now: now)
  }

  private enum RedrawMode {
    /// Only when a report changed the rows, and the rate allows.
    case ifChanged
    /// Also when only the ages changed, as the rate allows (the timer's; not once stopped).
    case refreshingAges
    /// Now, whatever the rate.
    case force
  }

  /// Draws under the lock: the text of each drawing is relative to the previous one, so two
  /// drawings (a report's and the timer's) must reach the terminal in the order they were made.
  private func redraw(_ mode: RedrawMode, now: ContinuousClock.Instant) {
    state.withLock { state in
      if mode == .refreshingAges && state.timer == nil { return }
      if mode != .force {
        guard state.dirty || (mode == .refreshingAges && !state.order.isEmpty) else { return }
        if let last = state.lastDrawn, now - last < Self.redrawInterval { return }
      }
      state.dirty = false
      let rows = state.order.compactMap { state.rows[$0] }
      let drawing = Self.render(rows, notShown: state.notShown, over: state.drawn, now: now)
      state.drawn = drawing.lines
      // Only a drawing that wrote something counts against the rate, and not the empty table
      // (the header alone, drawn at start): the first peripheral shows the moment it is heard.
      if !drawing.text.isEmpty && (!state.order.isEmpty || state.notShown > 0) {
        state.lastDrawn = now
      }
      if !drawing.text.isEmpty { output(drawing.text) }
    }
  }

  /// Lets the table redraw by itself: a report held back by the rate shows when the rate
  /// allows, and the ages in the LAST column move on (every ``ageRefreshInterval``) while no
  /// report comes. Nothing is woken while the table has no rows.
  func startRedrawing() {
    let timer = RedrawTimer()
    timer.source.setEventHandler { [weak self] in self?.timerFired() }
    timer.source.activate()
    let previous = state.withLock { state in
      defer { state.timer = timer }
      return state.timer
    }
    previous?.source.cancel()
    scheduleRedraw()
  }

  /// Stops the timer of ``startRedrawing()`` and draws the final state at once.
  func stopRedrawing() {
    let timer = state.withLock { state in
      defer {
        state.timer = nil
        state.wakeAt = nil
      }
      return state.timer
    }
    timer?.source.cancel()
    redrawIfNeeded(force: true)
  }

  private func timerFired() {
    let now = ContinuousClock.now
    state.withLock { $0.wakeAt = nil }
    redraw(.refreshingAges, now: now)
    scheduleRedraw()
  }

  /// Arms the timer for the next due drawing, unless it is already armed for that or earlier:
  /// a held-back report when the rate allows it, else an age refresh while rows are shown.
  /// Armed under the lock, so the timer's deadline and `wakeAt` always agree. (Called after a
  /// report's drawing is written, so its clock reading costs the report nothing.)
  private func scheduleRedraw() {
    let now = ContinuousClock.now
    state.withLock { state in
      guard let timer = state.timer else { return }
      let next: ContinuousClock.Instant
      if state.dirty, let last = state.lastDrawn {
        next = last + Self.redrawInterval
      } else if !state.order.isEmpty {
        next = max(now, state.lastDrawn ?? now) + Self.ageRefreshInterval
      } else {
        return
      }
      if let armed = state.wakeAt, armed <= next { return }
      state.wakeAt = next
      timer.source.schedule(
        deadline: .now() + seconds(max(.zero, next - now)), repeating: .never,
        leeway: .milliseconds(10))
    }
  }

  /// The text that turns the drawing `previous` (the lines on screen, cursor below them) into
  /// one of `rows`, and the new drawing's lines. Lines that did not change are left alone: the
  /// cursor moves up to the first changed line, the rest is rewritten and what is left below
  /// is cleared. So a new peripheral is one new line at the bottom, written first, not after
  /// the header again (on a terminal each line can reach the reader separately). Built as
  /// bytes, without intermediate strings: it runs on the path from bluetoothd's signal to the
  /// screen.
  static func render(
    _ rows: [Row], notShown: Int, over previous: [[UInt8]], now: ContinuousClock.Instant
  ) -> (text: [UInt8], lines: [[UInt8]]) {
    var lines: [[UInt8]] = [headerBytes]
    lines.reserveCapacity(rows.count + 2)
    for row in rows {
      var line: [UInt8] = []
      line.reserveCapacity(64)
      appendLine(row, now: now, to: &line)
      lines.append(line)
    }
    if notShown > 0 {
      var line = Array("(".utf8)
      appendDecimal(notShown, to: &line)
      line.append(contentsOf: " more reports not shown)".utf8)
      lines.append(line)
    }
    var unchanged = 0
    while unchanged < min(lines.count, previous.count), lines[unchanged] == previous[unchanged] {
      unchanged += 1
    }
    if unchanged == lines.count && lines.count == previous.count { return ([], lines) }
    var out: [UInt8] = []
    out.reserveCapacity(64 * (lines.count - unchanged + 1))
    let up = previous.count - unchanged
    if up > 0 {
      out.append(contentsOf: "\u{1B}[".utf8)
      appendDecimal(up, to: &out)
      out.append(contentsOf: "A\r".utf8)
    }
    for line in lines[unchanged...] {
      out.append(contentsOf: line)
      out.append(contentsOf: endOfLine)
    }
    out.append(contentsOf: "\u{1B}[J".utf8)
    return (out, lines)
  }

  /// Clear to the end of the line, then a new line.
  private static let endOfLine: [UInt8] = Array("\u{1B}[K\n".utf8)

  static let header = "ADDRESS            RSSI  SEEN  LAST    NAME"
  private static let headerBytes = Array(header.utf8)

  /// One row: address, RSSI (`?` unknown), times seen, seconds since last seen, name.
  static func line(_ row: Row, now: ContinuousClock.Instant) -> String {
    var out: [UInt8] = []
    appendLine(row, now: now, to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  /// Appends ``line(_:now:)``'s text to `out`.
  static func appendLine(_ row: Row, now: ContinuousClock.Instant, to out: inout [UInt8]) {
    padded(18, &out) { $0.append(contentsOf: row.address.utf8) }
    out.append(UInt8(ascii: " "))
    padded(5, &out) { out in
      if let rssi = row.rssi {
        appendDecimal(rssi, to: &out)
      } else {
        out.append(UInt8(ascii: "?"))
      }
    }
    out.append(UInt8(ascii: " "))
    padded(5, &out) { appendDecimal(row.seen, to: &$0) }
    out.append(UInt8(ascii: " "))
    let ago = seconds(now - row.lastSeen)
    padded(7, &out) { out in
      if ago < 1 {
        out.append(contentsOf: "now".utf8)
      } else {
        appendDecimal(Int(ago), to: &out)
        out.append(contentsOf: "s ago".utf8)
      }
    }
    out.append(UInt8(ascii: " "))
    if let name = row.name { JSONValue.appendQuoted(name, to: &out) }
  }

  /// Runs `write`, then pads what it wrote with spaces to `width` bytes (the padded columns
  /// are ASCII).
  private static func padded(_ width: Int, _ out: inout [UInt8], _ write: (inout [UInt8]) -> Void) {
    let start = out.count
    write(&out)
    let written = out.count - start
    if written < width {
      out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: width - written))
    }
  }

  /// Appends `value` in decimal.
  private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
    out.append(contentsOf: String(value).utf8)  // a small string: no allocation
  }
}
