// The built `blekit` against a real mosquitto: `fleet` merging two gateways' sightings, and
// the exit statuses of a bad URL and of an unreachable broker.

import Fleet
import Foundation
import JSON
import TestSupport
import Testing

@Suite struct FleetCommandTests {
  struct Run {
    var status: Int32
    var output: String
    var error: String
  }

  /// Runs the built blekit on a thread of its own and waits for it there (at most `limit`
  /// seconds, then killed). Not on Swift's cooperative pool: it has one thread per core (two
  /// here), and a test blocking one for the fleet's 10 s starved the other tests' timers and
  /// this test's own publishers (a full `swift test` failed so, 2026-12-03).
  func blekit(_ arguments: [String], limit: Double = 20) async throws -> Run {
    let executable = try #require(builtBlekit, "build the blekit product first")
    return try await withCheckedThrowingContinuation { continuation in
      Thread {
        continuation.resume(
          with: Result { try Self.run(executable, arguments, limit: limit) })
      }.start()
    }
  }

  /// ``blekit(_:limit:)``'s blocking part.
  static func run(_ executable: URL, _ arguments: [String], limit: Double) throws -> Run {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let run = try runCapturing(process, limit: limit)
    return Run(status: run.status, output: run.output, error: run.error)
  }

  @Test func fleetMergesTwoGateways() async throws {
    let broker = try MosquittoBroker()
    let url = broker.url
    let fleet = Task { [self] in
      try await blekit(["fleet", "--mqtt", url, "--timeout", "10"])
    }
    let id = Array(1...16).map { UInt8($0) }
    var publishers: [(GatewayPublisher, Int)] = []
    for (gateway, rssi) in [("gw-a", -70), ("gw-b", -55)] {
      var settings = GatewaySettings(
        broker: BrokerSettings(url: url), origin: GatewayOrigin(gateway: gateway, adapter: "hci0"),
        topics: TopicLayout(gateway: gateway))
      settings.broker.qos = 1
      settings.interval = .zero
      publishers.append((try await GatewayPublisher.connect(settings), rssi))
    }
    // Sightings are not retained: publish until the fleet (starting meanwhile) has surely
    // subscribed, then say goodbye.
    for _ in 0..<12 {
      for (publisher, rssi) in publishers {
        let report = AdvertisementReport(
          address: "00:AA:01:01:00:01", rssi: rssi, manufacturerData: [0xFFFF: [0x02, 0x10] + id])
        publisher.publish(report, id: report.folkBearsID)
      }
      try await Task.sleep(for: .milliseconds(200))
    }
    for (publisher, _) in publishers { _ = await publisher.close() }
    let run = try await fleet.value
    #expect(run.status == 0)
    let rows = run.output.split(separator: "\n").compactMap { parseJSON(String($0)) }
    let last = try #require(rows.last)
    #expect(last["id"]?.stringValue == "0102030405060708090a0b0c0d0e0f10")
    #expect(last["bestRSSI"]?.intValue == -55)
    guard case .array(let gateways)? = last["gateways"] else {
      Issue.record("no gateways in \(run.output)")
      return
    }
    #expect(gateways.compactMap { $0["gateway"]?.stringValue } == ["gw-a", "gw-b"])
    #expect(run.error.contains("gateway gw-a offline"))
  }

  @Test func badURLAndUnreachableBroker() async throws {
    let broker = try MosquittoBroker()
    let url = broker.url
    broker.stop()
    let unreachable = try await blekit(["fleet", "--mqtt", url, "--timeout", "2"])
    #expect(unreachable.status == 14)
    #expect(unreachable.error.split(separator: "\n").count == 1)
    #expect(unreachable.output.isEmpty)
    let bad = try await blekit(["monitor", "--mqtt", "tcp://h"])
    #expect(bad.status == 2)
    #expect(bad.error.contains("not an mqtt:// or mqtts:// URL"))
    let orphan = try await blekit(["scan", "--mqtt-qos", "1"])
    #expect(orphan.status == 2)
  }

  /// mqtts:// from the command line: with --mqtt-ca the fleet connects and runs to its
  /// timeout; without it, a broker whose CA the system does not trust is one line and exit 14
  /// (the broker unusable); a CA file that cannot be read, or one given for mqtt://, is a
  /// usage error (exit 2) before any connection.
  @Test func fleetOverTLS() async throws {
    let broker = try MosquittoBroker(tls: true)
    let trusted = try await blekit(
      ["fleet", "--mqtt", broker.url, "--mqtt-ca", broker.certificateAuthority, "--timeout", "2"])
    #expect(trusted.status == 0, "\(trusted.error)")
    let missing = broker.directory.appendingPathComponent("none.pem").path
    let plain = broker.url.replacingOccurrences(of: "mqtts://", with: "mqtt://")
    let untrusted = try await blekit(["fleet", "--mqtt", broker.url, "--timeout", "2"])
    #expect(untrusted.status == 14, "\(untrusted.error)")
    #expect(untrusted.error.split(separator: "\n").count == 1, "\(untrusted.error)")
    #expect(untrusted.error.contains("certificate verify failed"), "\(untrusted.error)")
    #expect(untrusted.output.isEmpty)
    for (url, reason) in [(broker.url, "cannot read the CA file"), (plain, "mqtts:// URLs only")] {
      let refused = try await blekit(["fleet", "--mqtt", url, "--mqtt-ca", missing])
      #expect(refused.status == 2, "\(refused.error)")
      #expect(refused.error.split(separator: "\n").first?.contains(reason) == true)
      #expect(refused.output.isEmpty)
    }
  }
}
