// `blekit read`: read one characteristic's value and print it, for scripts.

import ArgumentParsing
import BLEKit

/// Connects, reads a characteristic, prints the value (hex by default), disconnects.
struct ReadCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "read",
    abstract: "Read a characteristic and print its value (hex by default).",
    discussion: """
      Finds the device (an address bluetoothd knows is used at once; otherwise, and for a \
      NAME, it scans until the device appears), connects, reads CHAR-UUID and prints the \
      value on standard output: lowercase hex and a newline, the value as UTF-8 text with \
      --text, or the bytes exactly with --raw. Long values are read whole (bluetoothd uses \
      read-blob requests). The connection is closed afterwards unless it was already open. \
      With --descriptor it reads that descriptor of CHAR-UUID instead (e.g. 2901, the user \
      description). A device not seen within --timeout exits 6, no such characteristic or \
      descriptor 10, a characteristic without the read property 11, a read the device \
      refuses 5 or 8.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic, e.g. 2a00.")
    let service: Option<String> = .characteristicService
    let descriptor: Option<String> = .descriptor
    let text = Flag("--text", help: "Print the value as UTF-8 text.")
    let raw = Flag("--raw", help: "Write the value's bytes exactly, without a newline.")
    let adapter: Option<String> = .adapter()
    let timeout: DefaultedOption<Duration> = .connectTimeout
  }

  let target: PeripheralTarget
  let characteristic: BluetoothUUID
  let service: BluetoothUUID?
  let descriptor: BluetoothUUID?
  let format: ValueFormat
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    characteristic = try parseAttributeUUID(arguments.characteristic, label: "CHAR-UUID")
    service = try parseCharacteristicService(arguments.service)
    descriptor = try parseDescriptor(arguments.descriptor)
    format = try ValueFormat.from(text: arguments.text, raw: arguments.raw)
    adapter = arguments.adapter
    timeout = arguments.timeout
    try checkTimeout(timeout)
  }

  /// The most bytes an attribute value holds (Core spec, ATT): a read never returns more.
  static let attributeValueLimit = 512

  /// ATT's Attribute Not Long error code (Core Vol 3 Part F 3.4.1.1).
  static let attributeNotLong: UInt8 = 0x0b

  /// A read's failure in plain words where bluetoothd's are cryptic: a peer that answers a
  /// read blob with "Attribute Not Long" (ATT error 0x0b) fails bluetoothd 5.66's long read of
  /// a value of exactly MTU - 1 bytes.
  static func explain(_ error: any Error, mtu: Int) -> any Error {
    if (error as? BluetoothError)?.attErrorCode == attributeNotLong {
      return CLIError(
        .remoteError,
        "the peer answered \"Attribute Not Long\" (ATT error 0x0b) when bluetoothd read on "
          + "past the first \(mtu - 1) bytes: bluetoothd 5.66 treats that answer as a failure, "
          + "so a value of exactly MTU - 1 = \(mtu - 1) bytes cannot be read through it")
    }
    return exitError(error)
  }

  func run() async throws {
    let session = try await GattSession.open(
      target, adapter: adapter, timeout: timeout, progress: ProgressReport().callAsFunction)
    do {
      let found = try await session.characteristic(characteristic, service: service)
      if let descriptor {
        let target = try await session.descriptor(descriptor, of: found)
        let value: [UInt8]
        do {
          value = try await session.peripheral.readValue(for: target)
        } catch {
          throw exitError(error)
        }
        await session.close()
        writeStandardOutput(format.render(value))
        return
      }
      guard found.properties.contains(.read) else {
        throw CLIError(
          .notSupported,
          "characteristic \(uuidLabel(characteristic)) is not readable (flags: "
            + "\(flagList(found)))")
      }
      let value: [UInt8]
      do {
        value = try await session.peripheral.readValue(for: found)
      } catch {
        throw Self.explain(error, mtu: await session.peripheral.mtu(for: found))
      }
      await session.close()
      if value.count == Self.attributeValueLimit {
        writeStandardError(
          "blekit: note: the value is \(value.count) bytes, the most an attribute holds; "
            + "bluetoothd cuts a longer value to \(value.count) bytes without an error\n")
      }
      writeStandardOutput(format.render(value))
    } catch {
      await session.close()
      throw error
    }
  }
}
