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

  @Test func drawingMovesUpRewritesAndClears() {
    let now = ContinuousClock.now
    let rows = [
      ScanLiveTable.Row(address: "00:AA:01:01:00:01", name: "a", rssi: -7, seen: 2, lastSeen: now),
      ScanLiveTable.Row(
        address: "00:AA:01:02:00:02", name: nil, rssi: nil, seen: 1,
        lastSeen: now.advanced(by: .seconds(-12))),
    ]
    let first = ScanLiveTable.render(rows, notShown: 0, over: 0, now: now)
    let header = ScanLiveTable.header
    #expect(first.lines == 3)
    #expect(
      String(decoding: first.text, as: UTF8.self)
        == "\(header)\u{1B}[K\n00:AA:01:01:00:01  -7    2     now     \"a\"\u{1B}[K\n"
        + "00:AA:01:02:00:02  ?     1     12s ago \u{1B}[K\n\u{1B}[J")
    // Over an earlier drawing of 3 lines, with 4 peripherals left out.
    let again = ScanLiveTable.render([], notShown: 4, over: 3, now: now)
    #expect(again.lines == 2)
    #expect(
      String(decoding: again.text, as: UTF8.self)
        == "\u{1B}[3A\r\(header)\u{1B}[K\n(4 more reports not shown)\u{1B}[K\n\u{1B}[J")
  }

  /// The drawings a table made, in order.
  final class Drawings: Sendable {
    let texts = Mutex<[String]>([])
    var count: Int { texts.withLock { $0.count } }
    var last: String { texts.withLock { $0.last ?? "" } }
  }

  @Test func firstSightingDrawsAtOnceThenTheRateIsBounded() async throws {
    let drawings = Drawings()
    let table = ScanLiveTable { bytes in
      drawings.texts.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
    }
    // The header alone, drawn at start, does not hold back the first sighting...
    table.redrawIfNeeded(force: true)
    #expect(drawings.count == 1)
    let start = ContinuousClock.now
    table.note(address: "00:AA:01:01:00:01", name: "peer", rssi: nil, at: .now)
    // ...which is on screen at once, without any timer tick.
    #expect(drawings.count == 2)
    #expect(drawings.last.contains("00:AA:01:01:00:01"))
    // A second report right after waits for the interval: no drawing now...
    table.note(address: "00:AA:01:02:00:02", name: nil, rssi: -50, at: .now)
    table.redrawIfNeeded()
    let early = ContinuousClock.now - start < ScanLiveTable.redrawInterval
    if early { #expect(drawings.count == 2) }
    // ...and once the interval has passed, one drawing shows both rows.
    try await Task.sleep(for: ScanLiveTable.redrawInterval)
    table.redrawIfNeeded()
    #expect(drawings.count == 3)
    #expect(drawings.last.contains("00:AA:01:02:00:02"))
    // Nothing changed: no drawing, however often it is asked.
    try await Task.sleep(for: ScanLiveTable.redrawInterval)
    table.redrawIfNeeded()
    #expect(drawings.count == 3)
    // Forced (the final drawing at exit): drawn even so.
    table.redrawIfNeeded(force: true)
    #expect(drawings.count == 4)
  }

  @Test func nameFilterArguments() throws {
    let scan = try ScanCommand.parse(["--name", "lab"])
    #expect(scan.name == "lab")
  }
}
