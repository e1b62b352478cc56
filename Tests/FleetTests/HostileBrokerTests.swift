// `blekit fleet` against what anyone who may publish on the broker can retain there: numbers
// the JSON grammar allows but no clock means, nesting, payloads huge and tiny, terminal
// controls and bidi characters in every field and topic, and 10,000 gateway names. The built
// blekit runs on a pseudo-terminal (the bytes an operator's terminal receives are checked) and
// with --json on a pipe, its resident memory read from /proc.

import Foundation
import JSON
import MQTT
import TestSupport
import Testing

@testable import Fleet

@Suite(.serialized) struct HostileBrokerTests {
  /// Text that would retitle the terminal, clear it, ring, reorder what follows (RLO, an
  /// isolate), hide (zero-width, a tag), and start a line that looks like fleet's own.
  static let hostile =
    "ev\u{1B}]0;pwned\u{07}\u{1B}[2J\u{9B}31m\u{7F}\u{202E}il\u{2066}\u{200B}\u{E0041}\u{2028}"
    + "\nFAKE-LINE\r"

  /// What a topic level can hold that a terminal must not be given raw.
  static let topicHostile = "to\u{202E}pic\u{2067}\u{200F}\u{FEFF}\u{E0001}\u{2029}"

  /// `text` as a JSON string literal the way a hostile publisher may write it: controls as
  /// `\u00XX`, the rest raw (C1, DEL, bidi as raw UTF-8, which JSON allows).
  static func quoted(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case _ where scalar.value < 0x20:
        out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out + "\""
  }

  static func sighting(
    gateway: String, id: String?, address: String = "00:AA:01:01:00:01",
    timestamp: String = "1796220000.125", rssi: String = "-61", seq: String = "1",
    extra: String = ""
  ) -> String {
    "{\"type\":\"sighting\",\"gateway\":\(quoted(gateway)),\"seq\":\(seq),"
      + "\"timestamp\":\(timestamp),\"id\":\(id.map(quoted) ?? "null"),\"address\":\(quoted(address)),\"rssi\":\(rssi)"
      + extra + "}"
  }

  /// Every hostile message, as (topic, payload).
  static func hostileMessages() -> [(String, [UInt8])] {
    var messages: [(String, String)] = []
    // Numbers: out of every range the fields have, and the JSON grammar's edges.
    let numbers = [
      "1e300", "-1e300", "1.7976931348623157e308", "-1.7976931348623157e308", "1e400",
      "-1e400", "4.9e-324", "-0", "0", "123456789012345678901234567890",
      "-123456789012345678901234567890", "9223372036854775807", "-9223372036854775808",
      "9223372036854775808", "\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "null", "[]", "{}",
    ]
    for (index, number) in numbers.enumerated() {
      messages.append(
        (
          "blekit/num\(index)/ids/n\(index)",
          sighting(
            gateway: "num\(index)", id: "n\(index)", timestamp: number, rssi: number,
            seq: number)
        ))
    }
    // Deep nesting: refused past 32 levels, accepted below.
    for depth in [31, 33, 1000, 100_000] {
      let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
      messages.append(
        (
          "blekit/deep\(depth)/ids/d\(depth)",
          sighting(gateway: "deep\(depth)", id: "d\(depth)", extra: ",\"x\":\(nested)")
        ))
    }
    // Tiny and broken payloads.
    for (index, payload) in ["", "{}", "1", "\"", "[", "{\"type\":\"sighting\"}", "null"]
      .enumerated()
    {
      messages.append(("blekit/tiny\(index)/ids/t", payload))
    }
    // A key given twice: which one counts is the reader's guess (ours took the first, others
    // the last), so the payload is unreadable.
    messages.append(
      ("blekit/dup/ids/dup", sighting(gateway: "dup", id: "dup", extra: ",\"id\":\"other\"")))
    // Controls and bidi characters in every field, and in topics.
    messages.append(
      ("blekit/h1/ids/h1", sighting(gateway: hostile, id: hostile, address: hostile)))
    messages.append(
      ("blekit/h2/devices/h2", sighting(gateway: hostile, id: nil, address: hostile)))
    // Topics: MQTT forbids controls there (mosquitto refuses them), not format characters.
    messages.append(("blekit/\(topicHostile)/status", "offline"))
    messages.append(("blekit/\(topicHostile)x/status", "online"))
    messages.append(
      ("blekit/\(topicHostile)/ids/\(topicHostile)", sighting(gateway: "plain", id: "p")))
    return messages.map { ($0.0, Array($0.1.utf8)) }
  }

  /// Publishes retained messages (QoS 1) and waits until the broker has them all.
  static func retain(_ messages: [(String, [UInt8])], on url: String) async throws {
    var configuration = MQTTConfiguration(broker: try BrokerURL(url))
    configuration.bufferCapacity = messages.count + 10
    let client = try await MQTTClient.connect(configuration)
    for (topic, payload) in messages {
      client.publish(MQTTMessage(topic: topic, payload: payload, qos: .atLeastOnce, retain: true))
    }
    let statistics = await client.close(grace: .seconds(60))
    #expect(statistics.completed == messages.count, "\(statistics)")
  }

  /// Runs fleet on a thread of its own (not Swift's cooperative pool, see FleetCommandTests).
  static func fleet(_ arguments: [String], terminal: Bool, limit: Double) async throws
    -> FleetChildRun
  {
    try await withCheckedThrowingContinuation { continuation in
      Thread {
        continuation.resume(
          with: Result { try FleetChild.run(arguments, terminal: terminal, limit: limit) })
      }.start()
    }
  }

  /// What reaches the terminal holds no control or format character that came from a
  /// payload or a topic: fleet's own redraw (`ESC [ H ESC [ 2 J`) and line ends aside, no ESC,
  /// BEL, CR, DEL or C1 control, no bidi, zero-width, tag or line-separator character; no
  /// line starts with text that followed a newline in a payload.
  static func expectSafe(_ bytes: [UInt8], _ comment: Comment) {
    let text = String(decoding: bytes, as: UTF8.self)
    let own = text.replacingOccurrences(of: "\u{1B}[H\u{1B}[2J", with: "")
    let bad = own.unicodeScalars.filter { scalar in
      if scalar == "\n" { return false }
      if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { return true }
      switch scalar.properties.generalCategory {
      case .format, .lineSeparator, .paragraphSeparator: return true
      default: return false
      }
    }
    #expect(bad.isEmpty, "raw \(bad.map { String($0.value, radix: 16) }) \(comment)")
    #expect(
      !own.split(separator: "\n").contains { $0.hasPrefix("FAKE-LINE") },
      "a payload started a line \(comment)")
  }

  /// The numbers of the closing lines (`mqtt: ..., 3 dropped, ...` and `fleet: ...`) by name.
  static func closingCounts(_ text: String) -> [String: Int] {
    var counts: [String: Int] = [:]
    for line in text.split(separator: "\n")
    where line.hasPrefix("mqtt: ") || line.hasPrefix("fleet: ") && line.contains("sightings") {
      for part in line.dropFirst(line.hasPrefix("mqtt: ") ? 6 : 7).split(separator: ", ") {
        let words = part.split(separator: " ", maxSplits: 1)
        if words.count == 2, let value = Int(words[0]) { counts[String(words[1])] = value }
      }
    }
    return counts
  }

  @Test func hostileRetainedMessagesOnATerminal() async throws {
    let broker = try MosquittoBroker()
    try await Self.retain(Self.hostileMessages(), on: broker.url)
    let run = try await Self.fleet(
      ["fleet", "--mqtt", broker.url, "--timeout", "4"], terminal: true, limit: 30)
    print("\(#function): status \(run.status), VmRSS at most \(run.maximumRSS) KiB")
    let text = run.outputText
    #expect(run.status == 0 && !run.killed, "status \(run.status): \(text.suffix(2000))")
    Self.expectSafe(run.output, "on the terminal")
    // The hostile rows are shown, made visible, and said on the offline/online lines.
    #expect(text.contains("ev\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7f\\u{202e}il"), "\(text)")
    #expect(text.contains("\\x0aFAKE-LINE\\x0d"), "\(text)")
    #expect(text.contains("fleet: gateway to\\u{202e}pic\\u{2067}"), "\(text)")
    #expect(text.contains("ahead"), "a 1e300 timestamp is ahead of now")
    #expect(text.contains("fleet: "), "the closing line")
  }

  @Test func hostileRetainedMessagesAsJSON() async throws {
    let broker = try MosquittoBroker()
    try await Self.retain(Self.hostileMessages(), on: broker.url)
    let run = try await Self.fleet(
      ["fleet", "--mqtt", broker.url, "--timeout", "4", "--json"], terminal: false, limit: 30)
    print("\(#function): status \(run.status), VmRSS at most \(run.maximumRSS) KiB")
    #expect(run.status == 0 && !run.killed, "status \(run.status): \(run.errorText)")
    Self.expectSafe(run.output, "in --json output")
    Self.expectSafe(run.error, "on standard error")
    let rows = run.outputText.split(separator: "\n").map { parseJSON(String($0)) }
    #expect(!rows.isEmpty && rows.allSatisfy { $0 != nil }, "\(run.outputText)")
    // The payload's strings come back exactly, escaped in the JSON text.
    let hostileRow = rows.compactMap { $0 }.first { $0["id"]?.stringValue == Self.hostile }
    #expect(hostileRow?["address"]?.stringValue == Self.hostile)
    #expect(!rows.contains { ["dup", "other"].contains($0?["id"]?.stringValue) })
    #expect(run.errorText.contains("unreadable"), "\(run.errorText)")
  }

  /// One ID heard by 10,000 gateways (retained sightings on 10,000 topics) and 10,000
  /// gateways' retained status: rows keep 32 gateways, the availability map 1,024, the rest
  /// counted; --json lines stay short; memory stays flat.
  @Test func tenThousandGatewayNames() async throws {
    // mosquitto hands a new subscriber at most max_queued_messages (1,000) retained messages
    // beyond those in flight; here all of them.
    let broker = try MosquittoBroker(extraConfiguration: "max_queued_messages 0")
    var messages: [(String, [UInt8])] = []
    for index in 0..<10_000 {
      let gateway = "gw-\(index)-" + String(repeating: "g", count: 40)
      messages.append(
        ("blekit/\(gateway)/ids/one", Array(Self.sighting(gateway: gateway, id: "one").utf8)))
      messages.append(("blekit/\(gateway)/status", Array("online".utf8)))
    }
    try await Self.retain(messages, on: broker.url)
    let run = try await Self.fleet(
      ["fleet", "--mqtt", broker.url, "--timeout", "8", "--json"], terminal: false, limit: 60)
    print("\(#function): status \(run.status), VmRSS at most \(run.maximumRSS) KiB")
    #expect(run.status == 0 && !run.killed, "status \(run.status): \(run.errorText.suffix(500))")
    let lines = run.outputText.split(separator: "\n")
    #expect(lines.count > 100, "\(lines.count) rows")
    print(run.errorText.split(separator: "\n").suffix(2).joined(separator: "\n"))
    // Every message is accounted for: read, dropped and counted, or still unread at the end
    // (on a loaded machine fleet's 8 s may not see all 20,000).
    let counts = Self.closingCounts(run.errorText)
    let received = counts["received"] ?? 0
    #expect(received >= 2_000, "\(run.errorText.suffix(400))")
    #expect(counts["sightings"] == lines.count)
    #expect(
      (counts["sightings"] ?? 0) + (counts["statuses"] ?? 0) + (counts["dropped"] ?? 0)
        + (counts["unread"] ?? 0) == received, "\(counts)")
    #expect(counts["gateways forgotten"] == max(0, (counts["statuses"] ?? 0) - 1024))
    let longest = lines.map(\.utf8.count).max() ?? 0
    #expect(longest < 8_000, "longest --json line \(longest) bytes")
    let last = lines.last.flatMap { parseJSON(String($0)) }
    guard case .array(let gateways)? = last?["gateways"] else {
      Issue.record("no gateways in the last row")
      return
    }
    #expect(gateways.count == 32)
    #expect((last?["droppedGateways"]?.intValue ?? 0) + 32 == lines.count)
    #expect(run.errorText.contains("gateways dropped from rows"), "\(run.errorText)")
    #expect(run.maximumRSS < 48 * 1024, "VmRSS reached \(run.maximumRSS) KiB")
  }

  /// 48 retained sightings of 1 MiB each (a gateway name that size, distinct IDs): dropped
  /// before parsing, counted; VmRSS stays far below what keeping them would take.
  @Test func hugePayloadsAreDroppedUnread() async throws {
    let broker = try MosquittoBroker()
    let huge = String(repeating: "G", count: 1 << 20)
    let messages = (0..<48).map { index in
      (
        "blekit/big\(index)/ids/b\(index)",
        Array(Self.sighting(gateway: huge, id: "b\(index)").utf8)
      )
    }
    try await Self.retain(messages, on: broker.url)
    let run = try await Self.fleet(
      ["fleet", "--mqtt", broker.url, "--timeout", "4"], terminal: true, limit: 60)
    print("\(#function): status \(run.status), VmRSS at most \(run.maximumRSS) KiB")
    #expect(run.status == 0 && !run.killed, "status \(run.status)")
    #expect(run.outputText.contains("48 received, 48 too large"), "\(run.outputText.suffix(600))")
    #expect(run.maximumRSS < 40 * 1024, "VmRSS reached \(run.maximumRSS) KiB")
  }
}
