// Shared by the GATT commands (explore, read, write, notify): naming the device and the
// characteristic, connecting with one deadline, cleaning up, value rendering.

import ArgumentParsing
import BLEKit

/// Parses the ADDRESS|NAME argument.
///
/// Text made only of hex digits and colons (with at least one colon) is meant as an address and
/// must be a valid one; anything else is a name, matched exactly.
func parsePeripheralTarget(_ text: String) throws(UsageError) -> PeripheralTarget {
  guard !text.isEmpty else { throw .invalid("ADDRESS|NAME is empty") }
  let looksLikeAddress =
    text.contains(":") && text.allSatisfy { $0 == ":" || ($0.isASCII && $0.isHexDigit) }
  if looksLikeAddress {
    guard let address = BluetoothAddress(rawValue: text) else {
      throw .invalid(
        "'\(text)' is not a Bluetooth address (expected six hex pairs, e.g. 00:AA:01:01:00:01)")
    }
    return .address(address)
  }
  return .name(text)
}

/// Parses a characteristic, service or descriptor UUID argument.
func parseAttributeUUID(_ text: String, label: String) throws(UsageError) -> BluetoothUUID {
  do {
    return try BluetoothUUID(text)
  } catch {
    throw .invalid(
      "\(label): '\(text)' is not a UUID (use 4 or 8 hex digits, e.g. 2a00, or the 128-bit "
        + "8-4-4-4-12 form)")
  }
}

/// Checks a `--timeout` value.
func checkTimeout(_ timeout: Duration) throws(UsageError) {
  guard timeout > .zero else { throw .invalid("--timeout must be more than 0 seconds") }
}

/// How a value is printed by `read` and `notify`.
enum ValueFormat: Sendable, Equatable {
  /// Lowercase hex, no separators, one line per value (the default).
  case hex
  /// The bytes as UTF-8 text (invalid sequences replaced), one line per value.
  case text
  /// The bytes exactly, nothing added.
  case raw

  /// From the `--text` and `--raw` flags, which exclude each other.
  static func from(text: Bool, raw: Bool) throws(UsageError) -> ValueFormat {
    switch (text, raw) {
    case (true, true): throw .invalid("give either --text or --raw, not both")
    case (true, false): return .text
    case (false, true): return .raw
    case (false, false): return .hex
    }
  }

  /// The bytes to write on standard output for one value.
  func render(_ value: [UInt8]) -> [UInt8] {
    switch self {
    case .hex: Array(HexBytes.format(value).utf8) + [0x0A]
    case .text:
      // A peer's text reaches a terminal with its control characters made visible.
      Array(
        (StandardOutput.isTerminal
          ? TerminalText.visible(String(decoding: value, as: UTF8.self))
          : String(decoding: value, as: UTF8.self)).utf8) + [0x0A]
    // Exact on a file or pipe; a terminal gets them as `receive` shows a message (controls
    // made visible, non-UTF-8 as hex), never a peer's escape sequences.
    case .raw: StandardOutput.isTerminal ? TerminalText.show(value) : value
    }
  }
}

/// The value as text when it is printable (``HexBytes/printableText(_:)``) and holds no tab,
/// after dropping trailing NULs: devices often send C strings (`"name\0"`), while a short
/// binary value can happen to decode as letters and a tab (`68 09` is not `"h\t"`). `nil`
/// otherwise.
func printableText(_ value: [UInt8]) -> String? {
  var bytes = value[...]
  while bytes.last == 0 { bytes = bytes.dropLast() }
  guard !bytes.contains(0x09) else { return nil }
  return HexBytes.printableText(Array(bytes))
}

/// Hex with a space between bytes, for people: `62 6c 65 6b 69 74`.
func spacedHex(_ value: [UInt8]) -> String {
  HexBytes.format(value, separator: " ")
}

/// A UUID the short way (`2a00` for a SIG alias, else the full form).
func uuidLabel(_ uuid: BluetoothUUID) -> String { uuid.shortString }

/// An open connection to one peripheral for a GATT command, and how to undo it.
struct GattSession: Sendable {
  let manager: CentralManager
  let peripheral: Peripheral
  /// Whether this command made the connection (and so ends it).
  let connectedHere: Bool

  /// The least time connecting gets, even when finding used up most of `--timeout`.
  static let minimumConnectTime: Duration = .seconds(5)

  /// Opens the central on `adapter`, finds the target (scanning if needed), optionally forgets
  /// it and finds it again (`refresh`), then connects; all within `timeout` (connecting gets
  /// at least ``minimumConnectTime`` of it).
  static func open(
    _ target: PeripheralTarget, adapter: String?, timeout: Duration, refresh: Bool = false,
    progress: @Sendable (String) -> Void = { _ in }
  ) async throws -> GattSession {
    let deadline = ContinuousClock.now + timeout
    func remaining() -> Duration { max(deadline - .now, .milliseconds(1)) }
    let manager = try await openPoweredCentral(adapter: adapter)
    do {
      progress("finding \(target) on \(await manager.adapterName)")
      var identifier = try await manager.find(target, timeout: remaining())
      if refresh {
        progress("removing \(identifier) from bluetoothd's cache")
        try await manager.forget(identifier, timeout: remaining())
        progress("finding \(identifier) again")
        identifier = try await manager.find(.address(identifier.address), timeout: remaining())
      }
      let wasConnected = manager.isConnected(identifier)
      progress("connecting to \(identifier)")
      // A device found at the very end of the window still gets a fair chance to connect.
      let connectTimeout = max(remaining(), min(timeout, Self.minimumConnectTime))
      let peripheral = try await manager.connect(to: identifier, timeout: connectTimeout)
      return GattSession(manager: manager, peripheral: peripheral, connectedHere: !wasConnected)
    } catch {
      await shielded { await manager.close() }
      throw exitError(error)
    }
  }

  /// Disconnects (when this command connected) and closes the central, even when the calling
  /// task was cancelled (Ctrl-C): the work runs in a task of its own.
  func close() async {
    let manager = self.manager
    let peripheral = self.peripheral
    let disconnect = connectedHere
    await shielded {
      if disconnect { try? await peripheral.disconnect() }
      await manager.close()
    }
  }

  /// The characteristic `uuid` (in service `service`, when given): the first in handle order.
  /// - Throws: ``ExitStatus/notFound`` when the device has none.
  func characteristic(_ uuid: BluetoothUUID, service: BluetoothUUID?) async throws
    -> RemoteCharacteristic
  {
    do {
      return try await peripheral.characteristic(uuid, in: service)
    } catch  where error.code == .attributeNotFound {
      let place = service.map { " in service \(uuidLabel($0))" } ?? ""
      throw CLIError(
        .notFound, "\(peripheral.identifier) has no characteristic \(uuidLabel(uuid))\(place)")
    } catch {
      throw exitError(error)
    }
  }

  /// The descriptor `uuid` of `characteristic`; exit 10 when it has none.
  func descriptor(_ uuid: BluetoothUUID, of characteristic: RemoteCharacteristic) async throws
    -> RemoteDescriptor
  {
    let found: RemoteDescriptor?
    do {
      found = try await peripheral.descriptors(for: characteristic).first { $0.uuid == uuid }
    } catch {
      throw exitError(error)
    }
    guard let found else {
      throw CLIError(
        .notFound,
        "characteristic \(uuidLabel(characteristic.uuid)) of \(peripheral.identifier) has no "
          + "descriptor \(uuidLabel(uuid))")
    }
    return found
  }
}

/// Runs `work` in a task of its own, so cancellation of the caller does not cut it short;
/// bounded by `runUncancelled(within:_:)` (what is still pending after that is cancelled).
func shielded(_ work: @escaping @Sendable () async -> Void) async {
  await runUncancelled(within: PeripheralManager.closeLimit, work)
}

/// A characteristic's flags for messages: `read, notify`.
func flagList(_ characteristic: RemoteCharacteristic) -> String {
  characteristic.flags.isEmpty ? "none" : characteristic.flags.joined(separator: ", ")
}

/// Status lines on standard error, only when it is a terminal and not `quiet`.
struct ProgressReport: Sendable {
  let enabled: Bool

  init(quiet: Bool = false) {
    enabled = !quiet && standardErrorIsTerminal
  }

  func callAsFunction(_ text: String) {
    guard enabled else { return }
    writeStandardError("\(text)\n")
  }
}
