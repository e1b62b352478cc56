// `blekit scan`'s live table rows and its --name filter.

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

  @Test func nameFilterArguments() throws {
    let scan = try ScanCommand.parse(["--name", "lab"])
    #expect(scan.name == "lab")
  }
}
