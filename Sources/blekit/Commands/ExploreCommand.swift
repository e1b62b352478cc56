// `blekit explore`: connect, walk every service, characteristic and descriptor, read each
// value, optionally listen to every notifying characteristic.

import ArgumentParsing
import BLEKit
import JSON

/// Dumps a device's whole GATT tree with its values, as GATT explorer apps do.
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
      refuses to read shows bluetoothd's error on its own line and the walk goes on. An \
      attribute that needs pairing (encryption or authentication, ATT errors 0x05, 0x0c, \
      0x0f) or the device's authorization (0x08) is marked with what it needs; when the link \
      drops over it (bluetoothd tries to pair, and a failed pairing disconnects), explore \
      connects again (at most \(Self.maximumReconnects) times, within --timeout) and goes on, \
      so the dump is complete. A value whose read dropped the link twice without bluetoothd \
      saying why is marked too (bluetoothd 5.66 can answer a read cut by its failed pairing \
      with a bare error). The last line then says which values could not be read, and \
      explore exits 5. A characteristic that says it is readable but whose read failed \
      otherwise (bluetoothd busy or not answering, an error of the device's own) is counted \
      in that line too; when nothing else is missing, explore exits 8. With \
      --listen SECONDS, it then subscribes to every characteristic that notifies or \
      indicates and prints values as they come (a subscription that fails shows its error; \
      values dropped because standard output was read too slowly are counted in a last \
      line, exit 13). \
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
      target, adapter: adapter, timeout: timeout, refresh: refresh, reads: .all,
      reconnects: ExplorationReconnects(maximum: Self.maximumReconnects, timeout: timeout),
      progress: report)
    let session = walk.session
    do {
      let peripheral = walk.peripheral
      let tree = walk.tree
      let device = ExploredDevice(
        address: peripheral.identifier.address,
        name: await peripheral.name(),
        adapter: await session.manager.adapterName,
        mtu: Self.linkMTU(tree, on: peripheral))
      let unread = Unread(tree)
      printLine(
        json
          ? Self.json(device: device, tree: tree, unread: unread).text
          : Self.text(device: device, tree: tree, unread: unread))
      if let listen {
        try await Self.listen(
          to: tree, on: peripheral, for: listen, json: json, report: report)
      }
      await session.close()
      if let failure = unread.failure(address: device.address) { throw failure }
    } catch {
      await session.close()
      throw error
    }
  }

  /// The most times explore connects again when the link drops during the walk (each time over
  /// a value the device would not give without pairing, or a drop for no reason given).
  static let maximumReconnects = 4

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

  /// The values the walk could not read for a reason the user can act on: those the device
  /// gives only to a paired (or authorized) central, and those over which the link dropped.
  struct Unread: Sendable, Equatable {
    var needPairing = 0
    var needAuthorization = 0
    /// Reads that dropped the link twice without saying why.
    var droppedLink = 0
    /// Characteristics that say they are readable (`read` among their flags) whose read failed
    /// for another reason: bluetoothd busy (`InProgress`, seen on 5.82 while it raises the
    /// link's security), no answer in time, or an error of the device's application. A
    /// refusal of a characteristic without `read` is the device's design and not counted.
    var failed = 0

    init(_ tree: [ExploredService]) {
      for item in tree.flatMap(\.characteristics) {
        let readable = item.characteristic.properties.contains(.read)
        let reads = [(item.read, readable)] + item.descriptors.map { ($0.read, false) }
        for case (.failed(let failure), let counted) in reads {
          switch failure.requirement {
          case .pairing: needPairing += 1
          case .authorization: needAuthorization += 1
          case nil:
            if failure.droppedLink {
              droppedLink += 1
            } else if counted {
              failed += 1
            }
          }
        }
      }
    }

    var total: Int { needPairing + needAuthorization + droppedLink + failed }

    /// `2 values not read: 1 needs pairing (blekit pair ADDRESS), 1 dropped the link`, or
    /// `nil` when every value the device gives was read.
    func summary(address: BluetoothAddress) -> String? {
      guard total > 0 else { return nil }
      var parts: [String] = []
      if needPairing > 0 {
        parts.append(
          "\(needPairing) \(needPairing == 1 ? "needs" : "need") pairing first "
            + "(blekit pair \(address.rawValue))")
      }
      if needAuthorization > 0 {
        parts.append(
          "\(needAuthorization) \(needAuthorization == 1 ? "needs" : "need") the device's "
            + "authorization")
      }
      if droppedLink > 0 {
        parts.append(
          "\(droppedLink) dropped the link when read (" + (needPairing > 0 ? "" : "it ")
            + "may need pairing"
            + (needPairing > 0 ? " too)" : ": blekit pair \(address.rawValue))"))
      }
      if failed > 0 {
        parts.append("\(failed) failed (the error is on \(failed == 1 ? "its" : "their") line)")
      }
      return "\(total) value\(total == 1 ? "" : "s") not read: " + parts.joined(separator: ", ")
    }

    /// Exit 5 when some values were not read because the device wants pairing or authorization
    /// for them, or reading them dropped the link (what a failed pairing does); exit 8 when the
    /// only values not read failed otherwise; `nil` when nothing is missing.
    func failure(address: BluetoothAddress) -> CLIError? {
      guard let summary = summary(address: address) else { return nil }
      // What the user can do something about (pair, ask for authorization) comes first;
      // values that only failed are BlueZ's or the device's errors.
      let needsSecurity = needPairing + needAuthorization + droppedLink > 0
      return CLIError(needsSecurity ? .permissionDenied : .remoteError, summary)
    }
  }

  // MARK: Text

  /// Bytes per line of hex in the text output.
  static let hexBytesPerLine = 16

  /// The whole tree as aligned text.
  static func text(device: ExploredDevice, tree: [ExploredService], unread: Unread? = nil)
    -> String
  {
    var lines: [String] = []
    var head = device.address.rawValue
    if let name = device.name { head += "  " + JSONValue.quoted(name) }
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
        lines += valueLines(item.read, indent: "    ", address: device.address)
        for descriptor in item.descriptors {
          var line = "    descriptor \(uuidLabel(descriptor.descriptor.uuid))"
          if let name = AssignedNumbers.descriptorName(descriptor.descriptor.uuid) {
            line += "  \(name)"
          }
          lines.append(line)
          lines += valueLines(descriptor.read, indent: "      ", address: device.address)
        }
      }
    }
    if tree.isEmpty { lines.append("(no services)") }
    if let summary = (unread ?? Unread(tree)).summary(address: device.address) {
      lines.append(summary)
    }
    return lines.joined(separator: "\n")
  }

  /// `value  62 6c 65  "ble"` for a short value; long ones wrap their hex at 16 bytes and put
  /// the text on a line of its own. `error  <message>` for a failed read, saying first what the
  /// device needs when it said so.
  static func valueLines(
    _ read: AttributeReadResult, indent: String, address: BluetoothAddress
  ) -> [String] {
    switch read {
    case .notRead:
      return []
    case .failed(let failure):
      return ["\(indent)error  \(failureText(failure, address: address))"]
    case .value(let bytes):
      if bytes.isEmpty { return ["\(indent)value  (empty)"] }
      let text = printableText(bytes).map(JSONValue.quoted)
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

  /// A failed read for a person: what the device needs first (pairing, authorization) when
  /// bluetoothd's error says so, whether the link dropped over it, then bluetoothd's words.
  static func failureText(_ failure: AttributeReadFailure, address: BluetoothAddress) -> String {
    let dropped = failure.droppedLink ? "the link dropped (connected again); " : ""
    switch failure.requirement {
    case .pairing:
      return "needs encryption: pair first (blekit pair \(address.rawValue)); \(dropped)"
        + "bluetoothd: \(failure.description)"
    case .authorization:
      return "needs the device's authorization (pairing alone may not do); \(dropped)"
        + "bluetoothd: \(failure.description)"
    case nil:
      guard failure.droppedLink else { return failure.description }
      return "the link dropped when reading it (it may need pairing: blekit pair "
        + "\(address.rawValue)); bluetoothd: \(failure.description)"
    }
  }

  // MARK: JSON

  /// The whole tree as one JSON object.
  static func json(device: ExploredDevice, tree: [ExploredService], unread: Unread? = nil)
    -> JSONValue
  {
    let unread = unread ?? Unread(tree)
    return .object([
      .init("type", .string("explore")),
      .init("address", .string(device.address.rawValue)),
      .init("name", device.name.map { .string($0) } ?? .null),
      .init("adapter", .string(device.adapter)),
      .init("mtu", device.mtu.map { .int($0) } ?? .null),
      .init(
        "services",
        .array(
          tree.map { explored in
            .object(
              uuidFields(explored.service.uuid, AssignedNumbers.serviceName) + [
                .init("primary", .bool(explored.service.isPrimary)),
                .init("characteristics", .array(explored.characteristics.map(json))),
              ])
          })
      ),
      .init("unread", .int(unread.total)),
    ])
  }

  static func json(_ item: ExploredCharacteristic) -> JSONValue {
    .object(
      uuidFields(item.characteristic.uuid, AssignedNumbers.characteristicName)
        + [.init("flags", .array(item.characteristic.flags.map { .string($0) }))]
        + valueFields(item.read)
        + [
          .init(
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

  /// The `needs` field's word for a requirement.
  static func needsName(_ requirement: AttributeAccessRequirement) -> String {
    switch requirement {
    case .pairing: "pairing"
    case .authorization: "authorization"
    }
  }

  /// `uuid` (full form), `shortUUID`, `name` (or null).
  static func uuidFields(
    _ uuid: BluetoothUUID, _ name: (BluetoothUUID) -> String?
  ) -> [JSONValue.Field] {
    [
      .init("uuid", .string(uuid.uuidString)),
      .init("shortUUID", .string(uuid.shortString)),
      .init("name", name(uuid).map { .string($0) } ?? .null),
    ]
  }

  /// `value` (hex or null), `text` (printable text or null), `error` (object or null: the
  /// BlueZ error's `name` and `message`, and `droppedLink`), `needs` (`"pairing"`,
  /// `"authorization"` or null: what the device wants before it gives the value).
  static func valueFields(_ read: AttributeReadResult) -> [JSONValue.Field] {
    switch read {
    case .notRead:
      return [
        .init("value", .null), .init("text", .null), .init("error", .null), .init("needs", .null),
      ]
    case .value(let bytes):
      return [
        .init("value", .string(HexBytes.format(bytes))),
        .init("text", printableText(bytes).map { .string($0) } ?? .null),
        .init("error", .null), .init("needs", .null),
      ]
    case .failed(let failure):
      return [
        .init("value", .null), .init("text", .null),
        .init(
          "error",
          .object([
            .init("name", failure.errorName.map { .string($0) } ?? .null),
            .init("message", .string(failure.message)),
            .init("droppedLink", .bool(failure.droppedLink)),
          ])
        ),
        .init("needs", failure.requirement.map { .string(needsName($0)) } ?? .null),
      ]
    }
  }
}
