// `blekit adapters`: list the local adapters; switch one on or off.

import ArgumentParsing
import BLEKit
import JSON

/// Lists bluetoothd's adapters with their address and state, or powers one on or off.
struct AdaptersCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "adapters",
    abstract: "List Bluetooth adapters: address, powered, discovering, roles, advertising.",
    discussion: """
      One line per adapter bluetoothd manages, as an aligned table on standard output. \
      PASSIVE says whether bluetoothd offers passive scanning (scan --passive: its \
      AdvertisementMonitorManager1, only with bluetoothd --experimental in BlueZ 5.66); \
      ADV-MAX is the longest advertising data the controller takes (its MaxAdvLen, or \
      "31 (legacy)" when bluetoothd does not report it, as 5.66 without --experimental); \
      SECONDARY lists the secondary channels of extended advertising (advertise \
      --secondary-channel). --json also gives the instances, includes, features and TX \
      power range. With \
      --power on|off, switches the adapter given by --adapter (default hci0) and waits until \
      bluetoothd reports the change, then lists that adapter. --json prints one JSON array.
      """
  )

  /// The values of `--power`.
  enum Power: String, CaseIterable, ExpressibleByArgument {
    case on
    case off
  }

  struct Arguments: ArgumentList {
    let adapter = Option<String>(
      "--adapter", short: "a", value: "NAME", help: "Only this adapter, e.g. hci1.")
    let power = Option<Power>(
      "--power", value: "on|off", help: "Switch the adapter (default hci0) on or off.")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(10),
      help: "How long to wait for a power change.")
    let json = Flag("--json", help: "Print a JSON array instead of the table.")
  }

  let adapter: String?
  let power: Power?
  let timeout: Duration
  let json: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    adapter = arguments.adapter
    power = arguments.power
    timeout = arguments.timeout
    try checkTimeout(timeout)
    json = arguments.json
  }

  func run() async throws {
    let manager: CentralManager
    do {
      manager = try await CentralManager.open(adapter: adapter)
    } catch {
      throw exitError(error)
    }
    do {
      if let power {
        try await manager.setPowered(power == .on, timeout: timeout)
      }
      var list = try await manager.adapters()
      if adapter != nil || power != nil {
        let name = await manager.adapterName
        list = list.filter { $0.name == name }
      }
      await manager.close()
      let rows = list.map { adapter in
        Row(
          adapter: adapter, advertising: manager.advertisingCapabilities(of: adapter),
          passive: manager.supportsPassiveScanning(adapter))
      }
      printLine(json ? JSONValue.array(rows.map(Self.json)).text : Self.table(rows))
    } catch {
      await manager.close()
      throw exitError(error)
    }
  }

  /// One adapter with what bluetoothd says about its advertising and passive scanning.
  struct Row {
    var adapter: AdapterInfo
    var advertising: AdvertisingCapabilities?
    var passive: Bool
  }

  /// The aligned table, header first; "no adapters" when the list is empty.
  static func table(_ rows: [Row]) -> String {
    guard !rows.isEmpty else { return "no adapters" }
    let header = [
      "NAME", "ADDRESS", "TYPE", "POWERED", "DISCOVERING", "ROLES", "PASSIVE", "ADV-MAX",
      "SECONDARY", "ALIAS",
    ]
    let cells = rows.map { row in
      let adapter = row.adapter
      return [
        adapter.name,
        adapter.address?.rawValue ?? "?",
        adapter.addressType?.rawValue ?? "-",
        poweredCell(adapter),
        adapter.isDiscovering ? "yes" : "no",
        adapter.roles.isEmpty ? "-" : adapter.roles.joined(separator: ","),
        row.passive ? "yes" : "no",
        advertisingLimitCell(row.advertising),
        secondaryCell(row.advertising),
        adapter.alias ?? "",
      ]
    }
    return alignedTable([header] + cells)
  }

  /// `251`, `31 (legacy)` when bluetoothd does not report MaxAdvLen, `-` without advertising.
  static func advertisingLimitCell(_ advertising: AdvertisingCapabilities?) -> String {
    guard let advertising else { return "-" }
    return advertising.maxAdvertisingDataLength.map(String.init)
      ?? "\(advertising.advertisingDataLimit) (legacy)"
  }

  /// `1M,2M,Coded`, or `-` when none is reported.
  static func secondaryCell(_ advertising: AdvertisingCapabilities?) -> String {
    let channels = advertising?.secondaryChannels.map(\.rawValue) ?? []
    return channels.isEmpty ? "-" : channels.joined(separator: ",")
  }

  /// `yes` or `no`, with BlueZ's power state when it says more (`no (off-blocked)`).
  static func poweredCell(_ adapter: AdapterInfo) -> String {
    let plain = adapter.isPowered ? "yes" : "no"
    guard let state = adapter.powerState, state != "on", state != "off" else { return plain }
    return "\(plain) (\(state))"
  }

  /// One adapter as a JSON object.
  static func json(_ row: Row) -> JSONValue {
    let adapter = row.adapter
    let advertising = row.advertising
    return .object([
      .init("name", .string(adapter.name)),
      .init("path", .string(adapter.objectPath)),
      .init("address", adapter.address.map { .string($0.rawValue) } ?? .null),
      .init("addressType", adapter.addressType.map { .string($0.rawValue) } ?? .null),
      .init("alias", adapter.alias.map { .string($0) } ?? .null),
      .init("powered", .bool(adapter.isPowered)),
      .init("powerState", adapter.powerState.map { .string($0) } ?? .null),
      .init("discovering", .bool(adapter.isDiscovering)),
      .init("discoverable", adapter.isDiscoverable.map { .bool($0) } ?? .null),
      .init("pairable", adapter.isPairable.map { .bool($0) } ?? .null),
      .init("roles", .array(adapter.roles.map { .string($0) })),
      .init("passiveScanning", .bool(row.passive)),
      .init(
        "secondaryChannels",
        .array((advertising?.secondaryChannels ?? []).map { .string($0.rawValue) })
      ),
      .init(
        "maxAdvertisingLength", advertising?.maxAdvertisingDataLength.map { .int($0) } ?? .null),
      .init("advertisingLimit", advertising.map { .int($0.advertisingDataLimit) } ?? .null),
      .init(
        "maxScanResponseLength", advertising?.maxScanResponseLength.map { .int($0) } ?? .null
      ),
      .init("txPowerMin", advertising?.txPowerRange.map { .int($0.lowerBound) } ?? .null),
      .init("txPowerMax", advertising?.txPowerRange.map { .int($0.upperBound) } ?? .null),
      .init(
        "advertisingInstances",
        advertising.map { .int($0.supportedInstances + $0.activeInstances) } ?? .null
      ),
      .init(
        "supportedIncludes", .array((advertising?.supportedIncludes ?? []).map { .string($0) })),
      .init("advertisingFeatures", .array((advertising?.features ?? []).map { .string($0) })),
    ])
  }
}

/// Lays out rows in columns two spaces apart; the last column is not padded.
func alignedTable(_ rows: [[String]]) -> String {
  let columns = rows.map(\.count).max() ?? 0
  var widths = [Int](repeating: 0, count: columns)
  for row in rows {
    for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
  }
  return rows.map { row in
    var line = ""
    for (index, cell) in row.enumerated() {
      if index == row.count - 1 {
        line += cell
      } else {
        line += cell + String(repeating: " ", count: widths[index] - cell.count + 2)
      }
    }
    while line.last == " " { line.removeLast() }
    return line
  }.joined(separator: "\n")
}
