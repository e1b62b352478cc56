// What `blekit serve` prints: writes on standard output (text, hex, or JSON lines), status on
// standard error.

import BLEKit
import JSON

/// The printer of one `blekit serve` run.
struct ServeOutput: Sendable {
  /// One JSON object per line on standard output for every event (`--json`).
  let json: Bool
  /// Written values as hex, never as text (`--hex`).
  let hex: Bool

  /// A central's write, or the bytes themselves for a characteristic whose writes go to
  /// standard output (`"writes": "stdout"`, unless `--json`): exact on a pipe or a file, each
  /// value escaped on a line of its own on a terminal (``StandardOutput/writePeerBytes(_:)``).
  func write(
    _ request: ATTWriteRequest, service: BluetoothUUID, to output: ServeProfile.WriteOutput
  ) {
    if json {
      var fields = Self.requestFields(
        "write", service: service, characteristic: request.characteristic,
        descriptor: request.descriptor, central: request.central, mtu: request.mtu,
        link: request.link, offset: request.offset)
      fields.append(.init("withoutResponse", .bool(request.withoutResponse)))
      fields.append(.init("hex", .string(HexBytes.format(request.value))))
      if let text = HexBytes.printableText(request.value) {
        fields.append(.init("text", .string(text)))
      }
      printLine(JSONValue.object(fields).text)
      return
    }
    switch output {
    case .ignore: return
    case .stdout where request.descriptor == nil:
      StandardOutput.writePeerBytesOrStop(request.value)
    case .print, .stdout:
      printLine(Self.writeLine(request, hex: hex))
    }
  }

  /// `write 2a39 from 00:AA:01:00:00:00: TEXT` (or `hex 0102`), a descriptor as `2a39/2901`.
  static func writeLine(_ request: ATTWriteRequest, hex: Bool) -> String {
    var attribute = request.characteristic.shortString
    if let descriptor = request.descriptor { attribute += "/\(descriptor.shortString)" }
    let who = request.central?.description ?? "a central"
    let offset = request.offset == 0 ? "" : " at offset \(request.offset)"
    let value: String
    if !hex, let text = HexBytes.printableText(request.value) {
      value = TerminalText.visible(text)
    } else {
      value = "hex " + HexBytes.format(request.value)
    }
    return "write \(attribute) from \(who)\(offset): \(value)"
  }

  /// A read a central made (JSON lines only: text mode keeps standard output for writes).
  func read(_ request: ATTReadRequest, service: BluetoothUUID, length: Int) {
    guard json else { return }
    var fields = Self.requestFields(
      "read", service: service, characteristic: request.characteristic,
      descriptor: request.descriptor, central: request.central, mtu: request.mtu,
      link: request.link, offset: request.offset)
    fields.append(.init("length", .int(length)))
    printLine(JSONValue.object(fields).text)
  }

  /// A status event: `event` names it in JSON; `text` is the line on standard error.
  func status(_ event: String, _ text: String, fields: [JSONValue.Field] = []) {
    if json {
      printLine(JSONValue.object([.init("event", .string(event))] + fields).text)
    } else {
      writeStandardError(text + "\n")
    }
  }

  static func requestFields(
    _ event: String, service: BluetoothUUID, characteristic: BluetoothUUID,
    descriptor: BluetoothUUID?, central: Central?, mtu: Int?, link: LinkType?, offset: Int
  ) -> [JSONValue.Field] {
    [
      .init("event", .string(event)),
      .init("service", .string(service.shortString)),
      .init("characteristic", .string(characteristic.shortString)),
      .init("descriptor", descriptor.map { .string($0.shortString) } ?? .null),
      .init("central", central.map { .string($0.description) } ?? .null),
      .init("mtu", mtu.map { .int($0) } ?? .null),
      .init("link", link.map { .string($0.rawValue) } ?? .null),
      .init("offset", .int(offset)),
    ]
  }
}
