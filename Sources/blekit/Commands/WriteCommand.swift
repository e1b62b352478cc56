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
      CHAR-UUID instead (a write request; e.g. 2901, a writable user description). With \
      --stdin it sends standard input until its end instead of one value: write requests of \
      up to 512 bytes each, one acknowledged before the next; with --without-response, write \
      commands of up to MTU-3 bytes through the socket bluetoothd hands out for them \
      (AcquireWrite), waiting while it is full. Write commands are never acknowledged: what \
      the device or the link drops is not reported, so use write requests when every byte \
      must arrive. Prints nothing on success. A characteristic without the matching write property exits 11, \
      no such characteristic or descriptor 10; a value longer than 512 bytes is refused \
      before connecting.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic.")
    let hex = OptionalArgument<String>("HEX", help: "The value in hex, e.g. 0102ff.")
    let text = Option<String>("--text", value: "TEXT", help: "Write this text's UTF-8 bytes.")
    let stdin = Flag("--stdin", help: "Send standard input, in as many writes as it takes.")
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
  /// The value, or `nil` for standard input (--stdin).
  let value: [UInt8]?
  let type: CharacteristicWriteType
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    characteristic = try parseAttributeUUID(arguments.characteristic, label: "CHAR-UUID")
    service = try parseCharacteristicService(arguments.service)
    switch (arguments.hex, arguments.text) {
    case _ where arguments.stdin:
      guard arguments.hex == nil, arguments.text == nil else {
        throw .invalid("--stdin sends standard input: give no HEX and no --text with it")
      }
      guard arguments.descriptor == nil else {
        throw .invalid("--stdin applies to characteristics, not to a descriptor")
      }
      value = nil
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
    if let value, value.count > Self.maximumValueLength {
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
      if let descriptor, let value {
        let target = try await session.descriptor(descriptor, of: found)
        do {
          try await session.peripheral.writeValue(value, for: target)
        } catch {
          throw exitError(error)
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
        if let value {
          try await session.peripheral.writeValue(value, for: found, type: type)
        } else if type == .withoutResponse {
          try await Self.sendStandardInput(through: session.peripheral, to: found)
        } else {
          for try await chunk in StandardInputChunks(chunkSize: Self.maximumValueLength) {
            try await session.peripheral.writeValue(chunk, for: found, type: .withResponse)
          }
        }
      } catch {
        throw exitError(error)
      }
      await session.close()
    } catch {
      await session.close()
      throw error
    }
  }

  /// Standard input as write commands through an AcquireWrite socket, until its end; then
  /// waits (up to 10 s) until bluetoothd has read the last one before the link is closed.
  static func sendStandardInput(
    through peripheral: Peripheral, to characteristic: RemoteCharacteristic
  ) async throws {
    let channel = try await peripheral.openWriteWithoutResponseChannel(for: characteristic)
    defer { channel.close() }
    let limit = channel.maximumValueLength
    for try await chunk in StandardInputChunks() {
      var start = 0
      while start < chunk.count {
        let end = min(start + limit, chunk.count)
        try await channel.send(Array(chunk[start..<end]))
        start = end
      }
    }
    guard await channel.drain(timeout: .seconds(10)) else {
      throw CLIError(
        .timedOut, "bluetoothd did not take the last write commands within 10 s")
    }
  }
}
