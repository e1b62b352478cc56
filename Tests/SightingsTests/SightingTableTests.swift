// SightingTable: per-ID counts, malformed counts by reason, and bounded memory by evicting
// the least recently seen ID.

import BLEKit
import Testing

@testable import Sightings

@Suite struct SightingTableTests {
  let start = ContinuousClock.Instant.now
  func at(_ seconds: Int) -> ContinuousClock.Instant { start.advanced(by: .seconds(seconds)) }

  @Test func countsPerID() {
    var table = SightingTable<ContinuousClock.Instant>(capacity: 8)
    let first = table.record(id: "a", at: at(0), rssi: -60, address: "x")
    let again = table.record(id: "a", at: at(30), rssi: -40, address: "y")
    let other = table.record(id: "b", at: at(10), rssi: 127, address: "z")
    #expect(first)
    #expect(!again)
    #expect(other)
    #expect(table.sightings == 3)
    #expect(table.count == 2)
    let a = try! #require(table["a"])
    #expect(a.statistics.count == 2)
    #expect(a.statistics.firstSeen == at(0))
    #expect(a.statistics.lastSeen == at(30))
    #expect(a.statistics.meanRSSI == -50)
    #expect(a.lastAddress == "y")
    #expect(table["b"]?.statistics.meanRSSI == nil)
    #expect(table.entries.map(\.id) == ["a", "b"])
  }

  @Test func malformedCountsByReason() {
    var table = SightingTable<ContinuousClock.Instant>()
    table.recordMalformed(MalformedPayload(reason: .tooShort, length: 1, detail: ""))
    table.recordMalformed(MalformedPayload(reason: .tooShort, length: 3, detail: ""))
    table.recordMalformed(MalformedPayload(reason: .trailingBytes, length: 19, detail: ""))
    #expect(table.malformed == [.tooShort: 2, .trailingBytes: 1])
    #expect(table.malformedTotal == 3)
    #expect(table.sightings == 0)
  }

  @Test func staysWithinCapacityEvictingTheLeastRecentlySeen() {
    var table = SightingTable<ContinuousClock.Instant>(capacity: 3)
    table.record(id: "old", at: at(0), rssi: nil, address: "")
    table.record(id: "mid", at: at(1), rssi: nil, address: "")
    table.record(id: "new", at: at(2), rssi: nil, address: "")
    table.record(id: "old", at: at(3), rssi: nil, address: "")  // "mid" is now the stalest
    table.record(id: "next", at: at(4), rssi: nil, address: "")
    #expect(table.count == 3)
    #expect(table["mid"] == nil)
    #expect(table["old"]?.statistics.count == 2)
    #expect(table.evictedIDs == 1)
    #expect(table.sightings == 5)
  }

  @Test func aLongRunKeepsTheTableBounded() {
    var table = SightingTable<ContinuousClock.Instant>(capacity: 64)
    for second in 0..<10_000 {
      table.record(id: "id\(second % 500)", at: at(second), rssi: -70, address: "")
    }
    #expect(table.count == 64)
    #expect(table.sightings == 10_000)
    #expect(table.evictedIDs > 0)
  }
}
