// `blekit scan`: discover advertising peripherals, one line (or JSON object) per discovery.

import ArgumentParsing
import BLEKit
import Fleet
import JSON
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Scans for LE peripherals, as CoreBluetooth's `scanForPeripherals(withServices:options:)`.
struct ScanCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "scan",
    abstract: "Discover advertising peripherals: one line per discovery.",
    discussion: """
      Sets bluetoothd's discovery filter (service UUIDs, RSSI, LE transport, duplicates) and \
      applies the same filters again here, because bluetoothd merges the filters of all its \
      clients. Peripherals bluetoothd already knows when the scan starts are listed too. An \
      RSSI of 127 is HCI's "not available" and shows as "?"; with --min-rssi, an unknown \
      RSSI passes the threshold (and the line says so). Discovery restarts every 2 s, because \
      some controllers report an advertiser that was already on only when scanning starts. \
      Scans until --timeout or Ctrl-C. On a terminal (without --json) the peripherals are \
      a live table (address, RSSI, times seen, last seen, name) redrawn at most 4 times a \
      second, with duplicates on; piped, each discovery is one line, with known company IDs \
      and 16-bit UUIDs named. With --mqtt each discovery is also published to the broker \
      (blekit/GATEWAY/devices/ADDRESS, on change or every --mqtt-interval seconds); a broker \
      that goes away never stops the scan (see docs/fleet.md). With --passive the controller \
      only listens: bluetoothd's advertisement monitor reports the advertisers whose data \
      matches --company (manufacturer data starting with the ID) or --service (first UUID of \
      its list, or its service data), or any advertisement carrying flags without either; no \
      scan responses, so fewer names. It needs bluetoothd --experimental (BlueZ 5.66); without \
      it blekit exits 15 and does not fall back to an active scan.
      """
  )

  struct Arguments: GatewayArguments {
    let service = RepeatedOption<String>(
      "--service", short: "s", value: "UUID",
      help: "Only peripherals advertising this service.")
    let minRSSI = Option<Int>(
      "--min-rssi", value: "DBM", help: "Only peripherals heard at or above this RSSI (-127...20).")
    let timeout = Option<Duration>(
      "--timeout", short: "t", value: "SECONDS", help: "Stop after this long.")
    let adapter: Option<String> = .adapter(example: "hci1")
    let company = RepeatedOption<UInt16>(
      "--company", short: "c", value: "ID",
      help: "Only peripherals with manufacturer data of this company ID (e.g. 0xFFFF).")
    let passive = Flag(
      "--passive",
      help: "Listen only, through an advertisement monitor (needs bluetoothd --experimental).")
    let duplicates = Flag(
      "--duplicates", help: "Report every advertisement, not each peripheral once.")
    let json = Flag("--json", help: "Print JSON Lines instead of text.")
    let name = Option<String>(
      "--name", short: "n", value: "TEXT", help: "Only peripherals whose name contains TEXT.")
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
    let gateway = GatewayOptions.gateway
    let homeAssistant = GatewayOptions.homeAssistant
  }

  /// How often the discovery session restarts (see `ScanOptions.restartInterval`).
  static let restartInterval: Duration = .seconds(2)

  let services: [BluetoothUUID]
  let companies: [UInt16]
  let passive: Bool
  let rssi: RSSIFilter
  let timeout: Duration?
  let adapter: String?
  let duplicates: Bool
  let json: Bool
  let name: String?
  let mqtt: GatewaySettings?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    services = try parseServiceUUIDs(arguments.service)
    companies = arguments.company
    passive = arguments.passive
    rssi = try parseRSSIFilter(arguments.minRSSI)
    if let timeout = arguments.timeout, timeout <= .zero {
      throw .invalid("--timeout must be more than 0 seconds")
    }
    timeout = arguments.timeout
    adapter = arguments.adapter
    duplicates = arguments.duplicates
    json = arguments.json
    name = arguments.name
    mqtt = try GatewayOptions.settings(arguments)
  }

  /// Whether a discovery passes `--name` (a case-insensitive substring of the name).
  static func nameMatches(_ discovery: Discovery, _ filter: String?) -> Bool {
    guard let filter, !filter.isEmpty else { return true }
    guard let name = discovery.name else { return false }
    return name.lowercased().contains(filter.lowercased())
  }

  func run() async throws {
    let manager = try await openPoweredCentral(adapter: adapter)
    let gateway: MQTTGateway?
    do {
      gateway = try await MQTTGateway.start(mqtt, adapter: await manager.adapterName)
    } catch {
      await manager.close()
      throw error
    }
    let live = !json && Syscall.isatty(STDOUT_FILENO) == 1 ? ScanLiveTable() : nil
    // A name can arrive after the first report (in the scan response): with --name the stream
    // gives every report, and each address is printed once here unless --duplicates.
    let options = ScanOptions(
      services: services, allowDuplicates: duplicates || live != nil || name != nil, rssi: rssi,
      restartInterval: Self.restartInterval, resumeWithin: .seconds(30),
      manufacturerIDs: companies, mode: passive ? .passive : .active)
    let timeout = self.timeout
    let printOnce = !duplicates && live == nil && name != nil
    let printer = DiscoveryPrinter(
      options: options, json: json, nameFilter: name, printOnce: printOnce, live: live,
      gateway: gateway)
    // The header, and the table's timer, before the scan starts: the moments after the start
    // are when a peripheral that is already advertising is reported, so nothing else is left
    // to do then.
    live?.redrawIfNeeded(force: true)
    live?.startRedrawing()
    // One stream for the table and for lines: a terminal's table is fed like a pipe.
    var discoveries: DiscoveryStream?
    do {
      let scan = try await manager.scan(options, onInterruption: noteScanInterruption)
      discoveries = scan
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
          for try await discovery in scan { printer.handle(discovery) }
        }
        if let timeout {
          group.addTask { try await Task.sleep(for: timeout) }
        }
        defer { group.cancelAll() }
        try await group.next()
      }
    } catch {
      live?.stopRedrawing()
      await manager.close()
      await gateway?.finish()
      noteDroppedDiscoveries(discoveries)
      throw exitError(error)
    }
    live?.stopRedrawing()
    await manager.close()
    await gateway?.finish()
    noteDroppedDiscoveries(discoveries)
  }

  /// Turns each discovery into output: a row of the live table, a line, or a JSON object.
  final class DiscoveryPrinter: Sendable {
    let options: ScanOptions
    let json: Bool
    let nameFilter: String?
    /// Print each address once (the stream gives every report when a name is filtered).
    let printOnce: Bool
    let live: ScanLiveTable?
    let gateway: MQTTGateway?
    private let printed = Mutex(Set<String>())

    init(
      options: ScanOptions, json: Bool, nameFilter: String?, printOnce: Bool,
      live: ScanLiveTable?, gateway: MQTTGateway?
    ) {
      self.gateway = gateway
      self.options = options
      self.json = json
      self.nameFilter = nameFilter
      self.printOnce = printOnce
      self.live = live
    }

    func handle(_ discovery: Discovery) {
      guard ScanCommand.nameMatches(discovery, nameFilter) else { return }
      gateway?.publish(discovery)
      if printOnce {
        let fresh = printed.withLock { printed in
          printed.count < 4096 && printed.insert(discovery.address.rawValue).inserted
        }
        guard fresh else { return }
      }
      if let live {
        live.note(discovery)
      } else {
        printLine(
          json
            ? ScanCommand.jsonLine(discovery, options: options)
            : ScanCommand.textLine(discovery, options))
      }
    }
  }

  /// `00:AA:01:01:00:01  rssi ?  "name"  services ...  manufacturer ffff:0210...`
  static func textLine(_ discovery: Discovery, _ options: ScanOptions) -> String {
    var parts = [discovery.address.rawValue]
    if let rssi = discovery.rssi {
      parts.append("rssi \(rssi)")
    } else {
      parts.append(options.rssi.minimum == nil ? "rssi ?" : "rssi ? (unknown, kept)")
    }
    if let name = discovery.name { parts.append(JSONValue.quoted(name)) }
    if let txPower = discovery.txPower { parts.append("tx \(txPower)") }
    if !discovery.serviceUUIDs.isEmpty {
      parts.append(
        "services "
          + discovery.serviceUUIDs.map { uuid in
            uuid.shortString + (AssignedNumbers.serviceName(uuid).map { " (\($0))" } ?? "")
          }.joined(separator: ","))
    }
    for (company, bytes) in discovery.manufacturerData.sorted(by: { $0.key < $1.key }) {
      let label = hex4(company) + (AssignedNumbers.companyName(company).map { " (\($0))" } ?? "")
      parts.append("manufacturer \(label):\(HexBytes.format(bytes))")
    }
    for (uuid, bytes) in discovery.serviceData.sorted(by: { $0.key < $1.key }) {
      let label = uuid.shortString + (AssignedNumbers.serviceName(uuid).map { " (\($0))" } ?? "")
      parts.append("service-data \(label):\(HexBytes.format(bytes))")
    }
    return parts.joined(separator: "  ")
  }

  /// One JSON object per discovery.
  static func jsonLine(_ discovery: Discovery, options: ScanOptions) -> String {
    let decision: String =
      switch options.rssi.evaluate(discovery.reportedRSSI) {
      case .noThreshold: "noThreshold"
      case .passed: "passed"
      case .passedUnknown: "passedUnknown"
      case .belowThreshold: "belowThreshold"
      case .excludedUnknown: "excludedUnknown"
      }
    let fields: [JSONValue.Field] = [
      .init("timestamp", .number(unixTime())),
      .init("address", .string(discovery.address.rawValue)),
      .init("addressType", discovery.addressType.map { .string($0.rawValue) } ?? .null),
      .init("name", discovery.name.map { .string($0) } ?? .null),
      .init("rssi", discovery.rssi.map { .int($0) } ?? .null),
      .init("reportedRSSI", discovery.reportedRSSI.map { .int($0) } ?? .null),
      .init("rssiFilter", .string(decision)),
      .init("txPower", discovery.txPower.map { .int($0) } ?? .null),
      .init("serviceUUIDs", .array(discovery.serviceUUIDs.map { .string($0.uuidString) })),
      .init(
        "manufacturerData",
        .array(
          discovery.manufacturerData.sorted(by: { $0.key < $1.key }).map {
            .object([
              .init("companyID", .int(Int($0.key))),
              .init("data", .string(HexBytes.format($0.value))),
            ])
          })
      ),
      .init(
        "serviceData",
        .array(
          discovery.serviceData.sorted(by: { $0.key < $1.key }).map {
            .object([
              .init("uuid", .string($0.key.uuidString)),
              .init("data", .string(HexBytes.format($0.value))),
            ])
          })
      ),
      .init("connected", .bool(discovery.isConnected)),
    ]
    return JSONValue.object(fields).text
  }
}

private func hex4(_ value: UInt16) -> String {
  let text = String(value, radix: 16)
  return String(repeating: "0", count: 4 - text.count) + text
}
