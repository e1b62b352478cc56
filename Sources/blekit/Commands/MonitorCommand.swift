// `blekit monitor`: a contact monitor (FolkBears'): scan with duplicates, decode one company's
// manufacturer data (FolkBears' TempUserId by default) or count a service's advertisers, and
// print per-ID statistics at the end.

import ArgumentParsing
import BLEKit
import Fleet
import Sightings

extension ManufacturerLayout: ExpressibleByArgument {}

/// Counts sightings per temporary ID (or per device advertising a service), as FolkBears'
/// monitor does, in bounded memory.
struct MonitorCommand: ParsableCommand {
  /// How long after the adapter's power-off bluetoothd's leaving the bus is waited for. On
  /// SIGTERM bluetoothd (5.66, 5.82; src/adapter.c, adapter_shutdown) powers every adapter off
  /// and exits once the last one has reported it, so its name goes right after the last
  /// Powered = false.
  static let stopAfterPowerOff: Duration = .milliseconds(500)

  static let configuration = CommandConfiguration(
    name: "monitor",
    abstract: "Count sightings per advertised ID (FolkBears TempUserId by default).",
    discussion: """
      Scans with duplicates and reads the manufacturer data of one company (--company, \
      default 0xFFFF). For 0xFFFF the FolkBears layout is decoded: type 0x02, length 0x10, \
      then a 16-byte temporary ID; for other companies the whole payload is the ID. A \
      payload that does not decode is counted by reason and skipped. With --service, every \
      report of a device advertising that service is a sighting of its address. Controllers \
      filter duplicate reports within one scan, so discovery restarts every --restart \
      seconds. At the end (Ctrl-C, SIGTERM or --timeout; exit 0) a summary gives, per ID, \
      times seen, first and last seen (seconds after the start), RSSI min/mean/max (? when \
      unknown, as HCI's 127) and sightings per minute over the whole run. At most --max-ids \
      IDs are kept; the least recently seen is evicted first. If bluetoothd stops or the \
      adapter is powered off, the summary is printed and the command fails. With --mqtt each \
      sighting is also published to the broker (blekit/GATEWAY/ids/ID, rate limited per ID), \
      every ID's summary every --mqtt-summary seconds and at the end; see docs/fleet.md. \
      With --passive the controller only listens: bluetoothd's advertisement monitor reports \
      advertisers whose manufacturer data starts with the company ID (or that advertise the \
      service), --restart does not apply, and a rotated ID is a new sighting when the data \
      changes. It needs bluetoothd --experimental (BlueZ 5.66); without it blekit exits 15 and \
      does not fall back to an active scan.
      """
  )

  struct Arguments: GatewayArguments {
    let company = Option<UInt16>(
      "--company", short: "c", value: "ID",
      help: "Company ID whose manufacturer data to decode (default 0xFFFF).")
    let layout = Option<ManufacturerLayout>(
      "--layout", value: "LAYOUT",
      help: "folkbears (default for 0xFFFF) or raw (the whole payload is the ID).")
    let service = Option<String>(
      "--service", short: "s", value: "UUID",
      help: "Count sightings of devices advertising this service instead.")
    let timeout = Option<Duration>(
      "--timeout", short: "t", value: "SECONDS", help: "Stop after this long.")
    let adapter: Option<String> = .adapter(example: "hci1")
    let passive = Flag(
      "--passive",
      help: "Listen only, through an advertisement monitor (needs bluetoothd --experimental).")
    let restart = Option<Duration>(
      "--restart", value: "SECONDS", help: "Restart discovery this often (default 2).")
    let maxIDs = Option<Int>(
      "--max-ids", value: "N", help: "Most IDs kept in the table (default 4096).")
    let json = Flag(
      "--json", help: "Print each sighting, malformed payload and the summary as JSON Lines.")
    let mqtt = GatewayOptions.mqtt
    let mqttUser = GatewayOptions.user
    let mqttPassword = GatewayOptions.password
    let mqttClientID = GatewayOptions.clientID
    let mqttQoS = GatewayOptions.qos
    let mqttCA = GatewayOptions.ca
    let mqttPrefix = GatewayOptions.prefix
    let mqttLayout = GatewayOptions.layout
    let mqttInterval = GatewayOptions.interval
    let mqttBuffer = GatewayOptions.buffer
    let mqttSummary = Option<Duration>(
      "--mqtt-summary", value: "SECONDS",
      help: "With --mqtt: publish every ID's summary this often (default 60).")
    let gateway = GatewayOptions.gateway
    let homeAssistant = GatewayOptions.homeAssistant
  }

  let target: MonitorTarget
  let timeout: Duration?
  let adapter: String?
  let restart: Duration
  let passive: Bool
  let maxIDs: Int
  let json: Bool
  let mqtt: GatewaySettings?
  let summaryInterval: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    if let text = arguments.service {
      guard arguments.company == nil, arguments.layout == nil else {
        throw .invalid("--service counts a service's advertisers; drop --company and --layout")
      }
      target = .service(try parseServiceUUIDs([text])[0])
    } else {
      let company = arguments.company ?? FolkBearsTempUserID.companyID
      target = .manufacturer(
        companyID: company,
        layout: arguments.layout ?? MonitorTarget.defaultLayout(for: company))
    }
    for (name, value) in [("--timeout", arguments.timeout), ("--restart", arguments.restart)] {
      if let value, value <= .zero { throw .invalid("\(name) must be more than 0 seconds") }
    }
    if let maxIDs = arguments.maxIDs, maxIDs < 1 { throw .invalid("--max-ids must be at least 1") }
    timeout = arguments.timeout
    adapter = arguments.adapter
    restart = arguments.restart ?? .seconds(2)
    passive = arguments.passive
    if passive, arguments.restart != nil {
      throw .invalid("--restart restarts active discovery; a --passive monitor has none")
    }
    maxIDs = arguments.maxIDs ?? 4096
    json = arguments.json
    mqtt = try GatewayOptions.settings(arguments)
    if let summary = arguments.mqttSummary, summary <= .zero || mqtt == nil {
      throw .invalid("--mqtt-summary needs --mqtt and more than 0 seconds")
    }
    summaryInterval = arguments.mqttSummary ?? .seconds(60)
  }

  /// How a scan ended: the statistics, and the error that stopped it, if any.
  private struct Ending: Sendable {
    var table: MonitorOutput.Table
    var error: (any Error)?
  }

  func run() async throws {
    let manager = try await openPoweredCentral(adapter: adapter)
    var services: [BluetoothUUID] = []
    var companies: [UInt16] = []
    switch target {
    case .service(let uuid): services = [uuid]
    case .manufacturer(let company, _): if passive { companies = [company] }
    }
    let options = ScanOptions(
      services: services, allowDuplicates: true, includeKnownPeripherals: false,
      restartInterval: passive ? nil : restart, resumeWithin: .seconds(30),
      manufacturerIDs: companies, mode: passive ? .passive : .active)
    let scan: DiscoveryStream
    do {
      scan = try await manager.scan(options, onInterruption: noteScanInterruption)
    } catch {
      await manager.close()
      throw exitError(error)
    }
    let adapterName = await manager.adapterName
    let gateway: MQTTGateway?
    do {
      gateway = try await MQTTGateway.start(mqtt, adapter: adapterName)
    } catch {
      await manager.close()
      throw error
    }
    if standardErrorIsTerminal {
      writeStandardError(
        "monitoring \(target) on \(adapterName); Ctrl-C or --timeout for the summary\n")
    }
    let start = ContinuousClock.now
    let startUnix = unixTime()
    if json {
      printLine(MonitorOutput.startJSON(target: target, adapter: adapterName, unixTime: startUnix))
    }
    var ending = await consume(scan, gateway: gateway, start: start, startUnix: startUnix)
    let run = MonitorOutput.Run(
      target: target, adapter: adapterName, start: start, startUnix: startUnix,
      duration: ContinuousClock.now - start)
    gateway?.publisher.publishSummaries(ending.table, start: start, startUnix: startUnix)
    await gateway?.finish()
    printLine(
      json
        ? MonitorOutput.summaryJSON(ending.table, run: run)
        : MonitorOutput.summaryText(ending.table, run: run))
    if let error = ending.error as? BluetoothError, error.code == .poweredOff,
      await centralState(
        of: manager, becomes: .serviceUnavailable, within: Self.stopAfterPowerOff)
    {
      // bluetoothd powers its adapters off as it stops: tell that apart from a power-off.
      ending.error = BluetoothError(.serviceUnavailable, "bluetoothd stopped during the monitor")
    }
    await manager.close()
    noteDroppedDiscoveries(scan)
    if let error = ending.error {
      throw exitError(error)
    }
  }

  /// Reads the scan until it ends, the timeout passes, or the task is cancelled (Ctrl-C).
  private func consume(
    _ scan: DiscoveryStream, gateway: MQTTGateway?, start: ContinuousClock.Instant,
    startUnix: Double
  ) async -> Ending {
    let summaryInterval = self.summaryInterval
    let target = self.target
    let json = self.json
    let capacity = maxIDs
    let timeout = self.timeout
    return await withTaskGroup(of: Ending?.self) { group in
      group.addTask {
        var ending = Ending(table: MonitorOutput.Table(capacity: capacity))
        do {
          var lastSummary = ContinuousClock.now
          for try await discovery in scan {
            let id = Self.count(discovery, in: &ending.table, target: target, json: json)
            if let gateway, let id {
              gateway.publish(discovery, id: id)
              if lastSummary.duration(to: .now) >= summaryInterval {
                lastSummary = .now
                gateway.publisher.publishSummaries(
                  ending.table, start: start, startUnix: startUnix)
              }
            }
          }
        } catch {
          ending.error = error
        }
        return ending
      }
      if let timeout {
        group.addTask {
          try? await Task.sleep(for: timeout)
          return nil
        }
      }
      var result: Ending?
      while let next = await group.next() {
        if let next {
          result = next
        }
        group.cancelAll()
      }
      return result ?? Ending(table: MonitorOutput.Table(capacity: capacity))
    }
  }

  /// Counts one report and prints what it means; returns the ID it is a sighting of.
  @discardableResult
  private static func count(
    _ discovery: Discovery, in table: inout MonitorOutput.Table, target: MonitorTarget,
    json: Bool
  ) -> String? {
    let address = discovery.address.rawValue
    switch target.read(discovery) {
    case .notTarget:
      return nil
    case .malformed(let payload):
      table.recordMalformed(payload)
      if json {
        printLine(MonitorOutput.malformedJSON(payload, address: address, unixTime: unixTime()))
      }
      return nil
    case .sighting(let id):
      let isNew = table.record(
        id: id, at: discovery.timestamp, rssi: discovery.reportedRSSI, address: address)
      if json {
        printLine(
          MonitorOutput.sightingJSON(
            id: id, address: address, rssi: discovery.rssi,
            count: table[id]?.statistics.count ?? 1, unixTime: unixTime()))
      } else if isNew {
        printLine(MonitorOutput.newIDLine(id: id, address: address, target: target))
      }
      return id
    }
  }
}
