// `blekit monitor`'s output: the summary table, JSON lines, and its argument checks.

import ArgumentParsing
import Sightings
import Testing

@testable import BLEKit
@testable import Bluetooth
@testable import blekit

@Suite struct MonitorOutputTests {
  let start = ContinuousClock.Instant.now
  let id = "0102030405060708090a0b0c0d0e0f10"

  func run(seconds: Int) -> MonitorOutput.Run {
    MonitorOutput.Run(
      target: .manufacturer(companyID: 0xFFFF, layout: .folkbears), adapter: "hci0",
      start: start, startUnix: 1_000, duration: .seconds(seconds))
  }

  func table() -> MonitorOutput.Table {
    var table = MonitorOutput.Table(capacity: 16)
    table.record(id: id, at: start.advanced(by: .seconds(1)), rssi: -60, address: "A")
    table.record(id: id, at: start.advanced(by: .seconds(5)), rssi: -40, address: "A")
    table.record(id: "ff", at: start.advanced(by: .seconds(2)), rssi: 127, address: "B")
    table.recordMalformed(MalformedPayload(reason: .tooShort, length: 1, detail: "short"))
    table.recordMalformed(MalformedPayload(reason: .trailingBytes, length: 19, detail: "long"))
    return table
  }

  @Test func summaryText() {
    let text = MonitorOutput.summaryText(table(), run: run(seconds: 30))
    let lines = text.split(separator: "\n").map(String.init)
    #expect(
      lines[0]
        == "monitored company 0xFFFF (FolkBears TempUserId) on hci0 for 30.0 s: 3 sightings, "
        + "2 IDs, 2 malformed skipped")
    #expect(lines[1].hasPrefix("ID "))
    #expect(
      lines[2].split(separator: " ")
        == [Substring(id), "2", "+1.0s", "+5.0s", "-60/-50.0/-40", "4.0"])
    #expect(lines[3].split(separator: " ") == ["ff", "1", "+2.0s", "+2.0s", "?", "2.0"])
    #expect(lines[4] == "malformed payloads skipped: too short 1, trailing bytes 1")
    #expect(lines.count == 5)
  }

  @Test func summaryJSON() {
    let json = MonitorOutput.summaryJSON(table(), run: run(seconds: 30))
    #expect(json.hasPrefix("{\"type\":\"summary\","))
    #expect(
      json.contains(
        "{\"id\":\"\(id)\",\"address\":\"A\",\"count\":2,\"firstSeen\":1001,\"lastSeen\":1005,"
          + "\"rssiMin\":-60,\"rssiMean\":-50,\"rssiMax\":-40,\"perMinute\":4}"))
    #expect(json.contains("\"malformed\":{\"too short\":1,\"trailing bytes\":1}"))
    #expect(json.contains("\"sightings\":3"))
  }

  @Test func emptyRunSummary() {
    let text = MonitorOutput.summaryText(MonitorOutput.Table(), run: run(seconds: 0))
    #expect(text.split(separator: "\n").count == 1)
    #expect(text.contains("0 sightings, 0 IDs, 0 malformed skipped"))
  }

  @Test func sightingAndMalformedLines() {
    #expect(
      MonitorOutput.sightingJSON(id: "ab", address: "A", rssi: nil, count: 3, unixTime: 12.5)
        == "{\"type\":\"sighting\",\"timestamp\":12.5,\"id\":\"ab\",\"address\":\"A\","
        + "\"rssi\":null,\"count\":3}")
    let payload = MalformedPayload(reason: .tooShort, length: 3, detail: "x")
    #expect(
      MonitorOutput.malformedJSON(payload, address: "A", unixTime: 1)
        == "{\"type\":\"malformed\",\"timestamp\":1,\"address\":\"A\",\"reason\":\"too short\","
        + "\"length\":3,\"detail\":\"x\"}")
  }

  @Test func arguments() throws {
    let folk = try MonitorCommand.parse([])
    #expect(folk.target == .manufacturer(companyID: 0xFFFF, layout: .folkbears))
    let other = try MonitorCommand.parse(["--company", "0x004C"])
    #expect(other.target == .manufacturer(companyID: 0x004C, layout: .raw))
    let service = try MonitorCommand.parse(["--service", "180f"])
    #expect(service.target == .service(BluetoothUUID(uint16: 0x180F)))
    #expect(throws: UsageError.self) {
      try MonitorCommand.parse(["--service", "180f", "-c", "1"])
    }
    #expect(throws: UsageError.self) {
      try MonitorCommand.parse(["--timeout", "0"])
    }
  }
}
