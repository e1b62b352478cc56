// `blekit scan`'s live table rows, its redraw rate, and its --name filter.

import Synchronization
import Testing

@testable import blekit

@Suite struct ScanLiveTableTests {
  @Test func rowColumns() {
    let now = ContinuousClock.now
    let row = ScanLiveTable.Row(
      address: "00:AA:01:01:00:01", name: "peer", rssi: nil, seen: 12,
      lastSeen: now.advanced(by: .seconds(-3)))
    #expect(ScanLiveTable.line(row, now: now) == "00:AA:01:01:00:01  ?     12    3s ago  \"peer\"")
    let fresh = ScanLiveTable.Row(
      address: "00:AA:01:01:00:01", name: nil, rssi: -61, seen: 1, lastSeen: now)
    #expect(ScanLiveTable.line(fresh, now: now) == "00:AA:01:01:00:01  -61   1     now     ")
    #expect(ScanLiveTable.header.hasPrefix("ADDRESS"))
  }

  @Test func redrawingRewritesOnlyFromTheFirstChangedLine() {
    let now = ContinuousClock.now
    let header = ScanLiveTable.header
    let first = ScanLiveTable.Row(
      address: "00:AA:01:01:00:01", name: "a", rssi: -7, seen: 2, lastSeen: now)
    var second = ScanLiveTable.Row(
      address: "00:AA:01:02:00:02", name: nil, rssi: nil, seen: 1,
      lastSeen: now.advanced(by: .seconds(-12)))
    let text = { (bytes: [UInt8]) in String(decoding: bytes, as: UTF8.self) }
    // The empty table: the header alone.
    let empty = ScanLiveTable.render([], notShown: 0, over: [], now: now)
    #expect(text(empty.text) == "\(header)\u{1B}[K\n\u{1B}[J")
    // A first peripheral: its line only, below the header already on screen (no cursor move).
    let one = ScanLiveTable.render([first], notShown: 0, over: empty.lines, now: now)
    #expect(text(one.text) == "00:AA:01:01:00:01  -7    2     now     \"a\"\u{1B}[K\n\u{1B}[J")
    #expect(one.lines.count == 2)
    // A second: again one line.
    let two = ScanLiveTable.render([first, second], notShown: 0, over: one.lines, now: now)
    #expect(text(two.text) == "00:AA:01:02:00:02  ?     1     12s ago \u{1B}[K\n\u{1B}[J")
    // Nothing changed: nothing to write.
    let same = ScanLiveTable.render([first, second], notShown: 0, over: two.lines, now: now)
    #expect(same.text.isEmpty)
    #expect(same.lines == two.lines)
    // The second row changed and 4 peripherals were left out: up one line, rewrite from there.
    second.seen = 3
    let changed = ScanLiveTable.render([first, second], notShown: 4, over: two.lines, now: now)
    #expect(
      text(changed.text)
        == "\u{1B}[1A\r00:AA:01:02:00:02  ?     3     12s ago \u{1B}[K\n"
        + "(4 more reports not shown)\u{1B}[K\n\u{1B}[J")
    #expect(changed.lines.count == 4)
    // A drawing over the whole table (the first row changed): up to the row below the header.
    let all = ScanLiveTable.render(
      [
        ScanLiveTable.Row(address: "00:AA:01:01:00:01", name: "b", rssi: -7, seen: 2, lastSeen: now)
      ],
      notShown: 0, over: changed.lines, now: now)
    #expect(text(all.text).hasPrefix("\u{1B}[3A\r00:AA:01:01:00:01"))
    #expect(text(all.text).hasSuffix("\"b\"\u{1B}[K\n\u{1B}[J"))
  }

  /// The drawings a table made, in order.
  final class Drawings: Sendable {
    let texts = Mutex<[String]>([])
    var count: Int { texts.withLock { $0.count } }
    var last: String { texts.withLock { $0.last ?? "" } }
  }

  @Test func firstSightingDrawsAtOnceThenTheRateIsBounded() {
    let drawings = Drawings()
    let table = ScanLiveTable { bytes in
      drawings.texts.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
    }
    // Every time is given, so the rate (and the ages, all "now") do not depend on how fast
    // the test runs.
    let t0 = ContinuousClock.now
    func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }
    // The header alone, drawn at start, does not hold back the first sighting...
    table.redrawIfNeeded(force: true, now: at(0))
    #expect(drawings.count == 1)
    table.note(address: "00:AA:01:01:00:01", name: "peer", rssi: nil, at: at(0))
    // ...which is on screen at once, without any timer.
    #expect(drawings.count == 2)
    #expect(drawings.last.contains("00:AA:01:01:00:01"))
    // A second report right after waits for the interval: no drawing before it has passed...
    table.note(address: "00:AA:01:02:00:02", name: nil, rssi: -50, at: at(10))
    table.redrawIfNeeded(now: at(100))
    #expect(drawings.count == 2)
    // ...and once it has, one drawing shows both rows.
    table.redrawIfNeeded(now: at(260))
    #expect(drawings.count == 3)
    #expect(drawings.last.contains("00:AA:01:02:00:02"))
    // Nothing changed: no drawing, however often it is asked.
    table.redrawIfNeeded(now: at(600))
    #expect(drawings.count == 3)
    // Forced, with the screen already showing everything: nothing to write.
    table.redrawIfNeeded(force: true, now: at(600))
    #expect(drawings.count == 3)
    // A report drawn at once (the last drawing is old), then one held back by the rate...
    table.note(address: "00:AA:01:02:00:02", name: nil, rssi: -40, at: at(700))
    #expect(drawings.count == 4)
    #expect(drawings.last.contains("-40"))
    table.note(address: "00:AA:01:02:00:02", name: nil, rssi: -41, at: at(710))
    #expect(drawings.count == 4)
    // ...which a forced drawing (the final one at exit) shows at once.
    table.redrawIfNeeded(force: true, now: at(720))
    #expect(drawings.count == 5)
    #expect(drawings.last.contains("-41"))
  }

  /// Waits up to `limit` for `condition`, checking every 20 ms.
  func eventually(within limit: Duration, _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
      if ContinuousClock.now >= deadline { return false }
      try await Task.sleep(for: .milliseconds(20))
    }
    return true
  }

  @Test func redrawsByItselfWhenDueAndOnlyThen() async throws {
    let drawings = Drawings()
    let table = ScanLiveTable { bytes in
      drawings.texts.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
    }
    table.redrawIfNeeded(force: true)
    table.startRedrawing()
    // No rows: nothing to draw, however long it runs.
    try await Task.sleep(for: .milliseconds(400))
    #expect(drawings.count == 1)
    // A first sighting shows at once; a second right after is held back by the rate and then
    // drawn by the timer, with nobody calling redrawIfNeeded.
    table.note(address: "00:AA:01:01:00:01", name: "peer", rssi: nil, at: .now)
    #expect(drawings.count == 2)
    table.note(address: "00:AA:01:02:00:02", name: nil, rssi: -50, at: .now)
    let held = try await eventually(within: .seconds(2)) {
      drawings.last.contains("00:AA:01:02:00:02")
    }
    #expect(held)
    // The ages move on without reports: a row last seen 5 s ago later reads 6 s.
    table.note(address: "00:AA:01:03:00:03", name: nil, rssi: -60, at: .now - .seconds(5))
    let aged = try await eventually(within: .seconds(3)) {
      drawings.texts.withLock { $0.contains { $0.contains("6s ago") } }
    }
    #expect(aged)
    // Stopped: one final drawing at most, then nothing more.
    table.stopRedrawing()
    let final = drawings.count
    try await Task.sleep(for: .milliseconds(1300))
    #expect(drawings.count == final)
  }

  @Test func nameFilterArguments() throws {
    let scan = try ScanCommand.parse(["--name", "lab"])
    #expect(scan.name == "lab")
  }
}
