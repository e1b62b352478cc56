// `blekit fleet`: the aggregator: subscribes to every gateway's topics on a broker and shows
// the merged live table per ID (which gateways saw it, best RSSI, last seen).

import ArgumentParsing
import Fleet

#if canImport(Glibc)
  import Glibc
#endif

/// Merges what every gateway publishes (`scan --mqtt`, `monitor --mqtt`) into one table.
struct FleetCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "fleet",
    abstract: "Merge every gateway's MQTT sightings into one live table per ID.",
    discussion: """
      Subscribes to --topic (default blekit/#, every gateway under the default prefix) and \
      merges the sightings gateways publish with --mqtt: per ID (the monitored ID, or the \
      address), which gateways saw it, each one's best RSSI and sightings, and when it was \
      last seen. On a terminal the table is redrawn every second; piped (or with --json) \
      each sighting prints the merged row as one JSON line. Gateways going offline (their \
      retained status) are said on standard error. Runs until --timeout or Ctrl-C (exit 0); \
      a broker that cannot be reached at the start exits 14; later losses reconnect with \
      backoff. Whatever anyone publishes is read as hostile: text from payloads and topics \
      is shown with controls and bidi characters escaped (\\x1b, \\u{202e}), and memory \
      is bounded (16 KiB payloads, 4096 IDs, 32 gateways per ID, 1024 gateways' status), \
      what each bound drops counted in the closing lines (docs/fleet.md).
      """
  )

  struct Arguments: ArgumentList {
    let mqtt = Option<String>(
      "--mqtt", value: "URL", help: "The broker: mqtt://[USER[:PASS]@]HOST[:PORT] or mqtts://.")
    let mqttUser = GatewayOptions.user
    let mqttPassword = GatewayOptions.password
    let mqttClientID = Option<String>(
      "--mqtt-client-id", value: "ID",
      help: "MQTT client ID; with one the session is persistent (the broker queues while away).")
    let mqttCA = GatewayOptions.ca
    let topic = Option<String>(
      "--topic", value: "FILTER", help: "Topic filter to subscribe to (default blekit/#).")
    let timeout = Option<Duration>(
      "--timeout", short: "t", value: "SECONDS", help: "Stop after this long.")
    let json = Flag("--json", help: "JSON Lines even on a terminal.")
  }

  let broker: BrokerSettings
  let topic: String
  let timeout: Duration?
  let json: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    guard let url = arguments.mqtt else { throw .invalid("--mqtt URL is required") }
    var broker = BrokerSettings(url: url)
    broker.user = arguments.mqttUser
    broker.password = arguments.mqttPassword
    broker.clientID = arguments.mqttClientID
    broker.certificateAuthorities = arguments.mqttCA
    broker.qos = 1
    do throws(FleetError) {
      try broker.validate()
    } catch {
      throw .invalid("--mqtt: \(error.message)")
    }
    self.broker = broker
    topic = arguments.topic ?? "blekit/#"
    guard !topic.isEmpty else { throw .invalid("--topic must not be empty") }
    if let timeout = arguments.timeout, timeout <= .zero {
      throw .invalid("--timeout must be more than 0 seconds")
    }
    timeout = arguments.timeout
    json = arguments.json || Syscall.isatty(STDOUT_FILENO) != 1
  }

  func run() async throws {
    let subscriber: FleetSubscriber
    do throws(FleetError) {
      subscriber = try await FleetSubscriber.connect(broker, filter: topic)
    } catch {
      throw exitError(error)
    }
    let brokerName = subscriber.broker
    if standardErrorIsTerminal {
      writeStandardError("fleet: listening on \(brokerName) to \(topic); Ctrl-C to stop\n")
    }
    let json = self.json
    let timeout = self.timeout
    let events = Task {
      for await event in subscriber.events {
        writeStandardError(brokerEventLine(event, broker: brokerName) + "\n")
      }
    }
    let counts = await withTaskGroup(of: FleetCounts?.self) { group in
      group.addTask {
        var table = FleetTable()
        var counts = FleetCounts()
        var lastDraw = ContinuousClock.now - .seconds(1)
        for await update in subscriber.updates {
          switch update {
          case .sighting(let sighting):
            counts.sightings += 1
            let row = table.record(sighting)
            if json { printLine(FleetTable.json(row).text) }
          case .availability(let gateway, let online):
            counts.statuses += 1
            if table.setGateway(gateway, online: online) {
              writeStandardError(
                "fleet: gateway \(TerminalText.visible(gateway)) \(online ? "online" : "offline")\n"
              )
            }
          case .summary:
            counts.summaries += 1
          case .unreadable:
            counts.unreadable += 1
          }
          if !json, lastDraw.duration(to: .now) >= .seconds(1) {
            lastDraw = .now
            Self.draw(table)
          }
        }
        if !json { Self.draw(table) }
        counts.table(table)
        return counts
      }
      if let timeout {
        group.addTask {
          try? await Task.sleep(for: timeout)
          return nil
        }
      }
      // The first to end (the timeout, the subscription, Ctrl-C's cancellation) ends both;
      // the subscription's reader ends as its stream does, and returns the counts.
      var counts: FleetCounts?
      if let first = await group.next() { counts = first }
      group.cancelAll()
      for await other in group where counts == nil { counts = other }
      return counts ?? FleetCounts()
    }
    events.cancel()
    let report = await subscriber.close()
    writeStandardError(report.line + "\n")
    writeStandardError(counts.line + "\n")
  }

  /// Redraws the table on a terminal: ID, gateways with their best RSSI, best RSSI, last seen.
  /// Every text from a payload or a topic goes through ``TerminalText/visible(_:)``.
  static func draw(_ table: FleetTable) {
    var lines = [
      "\u{1B}[H\u{1B}[2J"
        + "ID                                 BEST  SEEN      GATEWAYS (best RSSI, sightings)"
    ]
    let now = fleetUnixTime()
    for row in table.entries.prefix(50) {
      let best = row.bestRSSI.map(String.init) ?? "?"
      let age = FleetTable.age(of: row.lastSeen, now: now)
      var gateways = row.gateways.map { view in
        "\(TerminalText.visible(view.gateway)) \(view.bestRSSI.map(String.init) ?? "?") x\(view.count)"
      }.joined(separator: ", ")
      if row.droppedGateways > 0 { gateways += " (+\(row.droppedGateways) dropped)" }
      lines.append(
        TerminalText.visible(row.key).padding(34) + " " + best.padding(5) + " "
          + age.padding(9) + " " + gateways)
    }
    if table.count > 50 { lines.append("... \(table.count - 50) more") }
    printLine(lines.joined(separator: "\n"))
  }
}

/// What fleet read and what its bounds let go, for the closing line.
struct FleetCounts: Sendable {
  var sightings = 0
  var statuses = 0
  var summaries = 0
  var unreadable = 0
  var evictedRows = 0
  var droppedGateways = 0
  var forgottenGateways = 0

  mutating func table(_ table: FleetTable) {
    evictedRows = table.evicted
    droppedGateways = table.droppedGateways
    forgottenGateways = table.forgottenGateways
  }

  /// `fleet: 120 sightings, 2 statuses, 0 summaries, 0 unreadable, 0 rows evicted, ...`
  var line: String {
    "fleet: \(sightings) sightings, \(statuses) statuses, \(summaries) summaries, "
      + "\(unreadable) unreadable, \(evictedRows) rows evicted, "
      + "\(droppedGateways) gateways dropped from rows, \(forgottenGateways) gateways forgotten"
  }
}

extension String {
  fileprivate func padding(_ width: Int) -> String {
    count >= width ? self : self + String(repeating: " ", count: width - count)
  }
}
