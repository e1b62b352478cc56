// `blekit explore`: connect, walk every service, characteristic and descriptor, read each value
// (seeds 001 and 002), optionally listen to every notifying characteristic.

import ArgumentParsing
import BLEKit

/// Dumps a device's whole GATT tree with its values, as the seed explorers do.
struct ExploreCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "explore",
    abstract: "Connect and dump every service, characteristic and descriptor with its value.",
    discussion: """
      Finds the device (an address bluetoothd knows at once, otherwise by scanning; a NAME \
      by scanning until a device advertising that name appears), connects, and walks its \
      services, characteristics and descriptors in handle order. Every characteristic and \
      descriptor is read, as a phone's GATT explorer does: a value is shown in hex, as text \
      when it is printable UTF-8, and SIG-assigned UUIDs are named. An attribute the device \
      refuses to read shows bluetoothd's error on its own line and the walk goes on. With \
      --listen SECONDS, it then subscribes to every characteristic that notifies or \
      indicates and prints values as they come (a subscription that fails shows its error). \
      --json prints the tree as one JSON object, then one JSON object per notification. \
      --refresh removes the device from bluetoothd's cache first, so its services are \
      discovered afresh (after the peer changed them). Disconnects at the end unless the \
      connection was already open.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let listen = Option<Duration>(
      "--listen", short: "l", value: "SECONDS",
      help: "Then print notifications of every notifying characteristic this long.")
    let json = Flag("--json", help: "Print JSON: the tree, then one object per notification.")
    let refresh = Flag("--refresh", help: "Forget bluetoothd's cached copy and rediscover.")
    let adapter: Option<String> = .adapter()
    let timeout: DefaultedOption<Duration> = .connectTimeout
  }

  let target: PeripheralTarget
  let listen: Duration?
  let json: Bool
  let refresh: Bool
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    if let listen = arguments.listen, listen <= .zero {
      throw .invalid("--listen must be more than 0 seconds")
    }
    listen = arguments.listen
    json = arguments.json
    refresh = arguments.refresh
    adapter = arguments.adapter
    timeout = arguments.timeout
    try checkTimeout(timeout)
  }

  func run() async throws {
    let report = ProgressReport(quiet: json)
    let walk = try await GattWalk.open(
      target, adapter: adapter, timeout: timeout, refresh: refresh, reads: .all, progress: report)
    let session = walk.session
    do {
      let peripheral = walk.peripheral
      let tree = walk.tree
      let device = ExploredDevice(
        address: peripheral.identifier.address,
        name: await peripheral.name(),
        adapter: await session.manager.adapterName,
        mtu: Self.linkMTU(tree, on: peripheral))
      printLine(
        json
          ? JSON.text(Self.json(device: device, tree: tree))
          : Self.text(device: device, tree: tree))
      if let listen {
        try await Self.listen(
          to: tree, on: peripheral, for: listen, json: json, report: report)
      }
      await session.close()
    } catch {
      await session.close()
      throw error
    }
  }

  /// The ATT MTU bluetoothd reports on the characteristics (the largest: one that was never
  /// updated can still show the initial 23), or `nil` when none reports one.
  static func linkMTU(_ tree: [ExploredService], on peripheral: Peripheral) -> Int? {
    tree.flatMap(\.characteristics).compactMap { peripheral.reportedMTU(for: $0.characteristic) }
      .max()
  }

  /// The device line's facts.
  struct ExploredDevice: Sendable {
    var address: BluetoothAddress
    var name: String?
    var adapter: String
    var mtu: Int?
  }

  // MARK: Text

  /// Bytes per line of hex in the text output.
  static let hexBytesPerLine = 16

  /// The whole tree as aligned text.
  static func text(device: ExploredDevice, tree: [ExploredService]) -> String {
    var lines: [String] = []
    var head = device.address.rawValue
    if let name = device.name { head += "  " + JSON.quoted(name) }
    head += "  via \(device.adapter)"
    if let mtu = device.mtu { head += "  MTU \(mtu)" }
    lines.append(head)
    for explored in tree {
      let service = explored.service
      var line = "service \(uuidLabel(service.uuid))"
      if let name = AssignedNumbers.serviceName(service.uuid) { line += "  \(name)" }
      if !service.isPrimary { line += "  (secondary)" }
      lines.append(line)
      for item in explored.characteristics {
        let characteristic = item.characteristic
        var line = "  characteristic \(uuidLabel(characteristic.uuid))"
        if let name = AssignedNumbers.characteristicName(characteristic.uuid) {
          line += "  \(name)"
        }
        line += "  [\(characteristic.flags.joined(separator: ", "))]"
        lines.append(line)
        lines += valueLines(item.read, indent: "    ")
        for descriptor in item.descriptors {
          var line = "    descriptor \(uuidLabel(descriptor.descriptor.uuid))"
          if let name = AssignedNumbers.descriptorName(descriptor.descriptor.uuid) {
            line += "  \(name)"
          }
          lines.append(line)
          lines += valueLines(descriptor.read, indent: "      ")
        }
      }
    }
    if tree.isEmpty { lines.append("(no services)") }
    return lines.joined(separator: "\n")
  }

  /// `value  62 6c 65  "ble"` for a short value; long ones wrap their hex at 16 bytes and put
  /// the text on a line of its own. `error  <message>` for a failed read.
  static func valueLines(_ read: AttributeReadResult, indent: String) -> [String] {
    switch read {
    case .notRead:
      return []
    case .failed(let failure):
      return ["\(indent)error  \(failure.description)"]
    case .value(let bytes):
      if bytes.isEmpty { return ["\(indent)value  (empty)"] }
      let text = printableText(bytes).map(JSON.quoted)
      if bytes.count <= hexBytesPerLine {
        return ["\(indent)value  \(spacedHex(bytes))" + (text.map { "  " + $0 } ?? "")]
      }
      var lines: [String] = []
      var offset = 0
      while offset < bytes.count {
        let chunk = Array(bytes[offset..<min(offset + hexBytesPerLine, bytes.count)])
        let label = offset == 0 ? "value  " : "       "
        lines.append("\(indent)\(label)\(spacedHex(chunk))")
        offset += hexBytesPerLine
      }
      lines[0] += "  (\(bytes.count) bytes)"
      if let text { lines.append("\(indent)text   \(text)") }
      return lines
    }
  }

  // MARK: JSON

  /// The whole tree as one JSON object.
  static func json(device: ExploredDevice, tree: [ExploredService]) -> JSON.Value {
    .object([
      ("type", .string("explore")),
      ("address", .string(device.address.rawValue)),
      ("name", device.name.map { .string($0) } ?? .null),
      ("adapter", .string(device.adapter)),
      ("mtu", device.mtu.map { .int($0) } ?? .null),
      (
        "services",
        .array(
          tree.map { explored in
            .object(
              uuidFields(explored.service.uuid, AssignedNumbers.serviceName) + [
                ("primary", .bool(explored.service.isPrimary)),
                ("characteristics", .array(explored.characteristics.map(json))),
              ])
          })
      ),
    ])
  }

  static func json(_ item: ExploredCharacteristic) -> JSON.Value {
    .object(
      uuidFields(item.characteristic.uuid, AssignedNumbers.characteristicName)
        + [("flags", .array(item.characteristic.flags.map { .string($0) }))]
        + valueFields(item.read)
        + [
          (
            "descriptors",
            .array(
              item.descriptors.map { descriptor in
                .object(
                  uuidFields(descriptor.descriptor.uuid, AssignedNumbers.descriptorName)
                    + valueFields(descriptor.read))
              })
          )
        ])
  }

  /// `uuid` (full form), `shortUUID`, `name` (or null).
  static func uuidFields(
    _ uuid: BluetoothUUID, _ name: (BluetoothUUID) -> String?
  ) -> [(String, JSON.Value)] {
    [
      ("uuid", .string(uuid.uuidString)),
      ("shortUUID", .string(uuid.shortString)),
      ("name", name(uuid).map { .string($0) } ?? .null),
    ]
  }

  /// `value` (hex or null), `text` (printable text or null), `error` (object or null).
  static func valueFields(_ read: AttributeReadResult) -> [(String, JSON.Value)] {
    switch read {
    case .notRead:
      return [("value", .null), ("text", .null), ("error", .null)]
    case .value(let bytes):
      return [
        ("value", .string(HexBytes.format(bytes))),
        ("text", printableText(bytes).map { .string($0) } ?? .null),
        ("error", .null),
      ]
    case .failed(let failure):
      return [
        ("value", .null), ("text", .null),
        (
          "error",
          .object([
            ("name", failure.errorName.map { .string($0) } ?? .null),
            ("message", .string(failure.message)),
          ])
        ),
      ]
    }
  }
}
