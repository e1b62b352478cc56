// `blekit write`: write one characteristic's value, for scripts.

import ArgumentParsing
import BLEKit

/// Connects, writes a characteristic (with or without response), disconnects.
struct WriteCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "write",
    abstract: "Write a value (hex, or --text) to a characteristic.",
    discussion: """
      Finds and connects as `blekit read` does, then writes the value: HEX (pairs of hex \
      digits, optionally separated by spaces, colons or dashes; `0x` prefix allowed) or the \
      UTF-8 bytes of --text. A write request (acknowledged by the device) by default; a write \
      command with --without-response. With --descriptor it writes that descriptor of \
      CHAR-UUID instead (a write request; e.g. 2901, a writable user description). Prints \
      nothing on success. A characteristic without the matching write property exits 11, \
      no such characteristic or descriptor 10; a value longer than 512 bytes is refused \
      before connecting.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic.")
    let hex = OptionalArgument<String>("HEX", help: "The value in hex, e.g. 0102ff.")
    let text = Option<String>("--text", value: "TEXT", help: "Write this text's UTF-8 bytes.")
    let withoutResponse = Flag(
      "--without-response", help: "Send a write command (no acknowledgement).")
    let service: Option<String> = .characteristicService
    let descriptor: Option<String> = .descriptor
    let adapter: Option<String> = .adapter()
    let timeout: DefaultedOption<Duration> = .connectTimeout
  }

  /// The longest attribute value (Core Specification, Vol 3, Part F, 3.2.9).
  static let maximumValueLength = 512

  let target: PeripheralTarget
  let characteristic: BluetoothUUID
  let service: BluetoothUUID?
  let descriptor: BluetoothUUID?
  let value: [UInt8]
  let type: CharacteristicWriteType
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    characteristic = try parseAttributeUUID(arguments.characteristic, label: "CHAR-UUID")
    service = try parseCharacteristicService(arguments.service)
    switch (arguments.hex, arguments.text) {
    case (let hex?, nil):
      do {
        value = try HexBytes.parse(hex)
      } catch {
        throw .invalid("HEX: \(error.description)")
      }
    case (nil, let text?):
      value = Array(text.utf8)
    case (.some, .some):
      throw .invalid("give the value either as HEX or with --text, not both")
    case (nil, nil):
      throw .invalid("give the value as HEX (e.g. 0102ff) or with --text TEXT")
    }
    guard value.count <= Self.maximumValueLength else {
      throw .invalid(
        "the value is \(value.count) bytes; an attribute value holds at most "
          + "\(Self.maximumValueLength)")
    }
    type = arguments.withoutResponse ? .withoutResponse : .withResponse
    descriptor = try parseDescriptor(arguments.descriptor)
    if descriptor != nil, arguments.withoutResponse {
      throw .invalid(
        "--without-response applies to characteristics; a descriptor takes a "
          + "write request")
    }
    adapter = arguments.adapter
    timeout = arguments.timeout
    try checkTimeout(timeout)
  }

  func run() async throws {
    let session = try await GattSession.open(
      target, adapter: adapter, timeout: timeout, progress: ProgressReport().callAsFunction)
    do {
      let found = try await session.characteristic(characteristic, service: service)
      if let descriptor {
        let target = try await session.descriptor(descriptor, of: found)
        do {
          try await session.peripheral.writeValue(value, for: target)
        } catch {
          throw gattCLIError(error)
        }
        await session.close()
        return
      }
      let needed: CharacteristicProperties = type == .withResponse ? .write : .writeWithoutResponse
      guard found.properties.contains(needed) else {
        let hint =
          type == .withResponse && found.properties.contains(.writeWithoutResponse)
          ? "; try --without-response"
          : type == .withoutResponse && found.properties.contains(.write)
            ? "; leave out --without-response" : ""
        throw CLIError(
          .notSupported,
          "characteristic \(uuidLabel(characteristic)) does not allow "
            + (type == .withResponse ? "write requests" : "writes without response")
            + " (flags: \(flagList(found)))\(hint)")
      }
      do {
        try await session.peripheral.writeValue(value, for: found, type: type)
      } catch {
        throw gattCLIError(error)
      }
      await session.close()
    } catch {
      await session.close()
      throw error
    }
  }
}
