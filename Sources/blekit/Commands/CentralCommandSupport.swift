// Shared by the central-side commands: opening a powered central, JSON text, wall-clock time,
// and writing to standard error.

import ArgumentParsing
import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

/// Opens a central on `adapter` (`nil`: bluetoothd's first adapter) and requires it powered on,
/// the way every central-side command starts; a failure is mapped by ``exitError(_:)``.
func openPoweredCentral(adapter: String?) async throws -> CentralManager {
  let manager: CentralManager
  do {
    manager = try await CentralManager.open(adapter: adapter)
  } catch {
    throw exitError(error)
  }
  do {
    try await manager.requirePoweredOn()
  } catch {
    await manager.close()
    throw exitError(error)
  }
  return manager
}

/// Whether `manager`'s state is `wanted` now or becomes it within `limit`: read from its state
/// updates, so the answer comes as soon as the state does.
func centralState(
  of manager: CentralManager, becomes wanted: CentralState, within limit: Duration
) async -> Bool {
  let updates = await manager.stateUpdates()
  return await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      for await state in updates where state == wanted { return true }
      return false
    }
    group.addTask {
      try? await Task.sleep(for: limit)
      return false
    }
    let first = await group.next() ?? false
    group.cancelAll()
    return first
  }
}

/// `--deadline` and `--idle-timeout` of receive and advertise, each more than 0.
func parseTransferDeadlines(deadline: Duration, idleTimeout: Duration) throws(UsageError)
  -> TransferDeadlines
{
  guard deadline > .zero else { throw .invalid("--deadline must be more than 0 seconds") }
  guard idleTimeout > .zero else { throw .invalid("--idle-timeout must be more than 0 seconds") }
  return TransferDeadlines(deadline: deadline, idleTimeout: idleTimeout)
}

/// Says on standard error how many discoveries a scan dropped because its output could not
/// keep up (see `DiscoveryStream.bufferLimit`): they are not in the output, and not silently.
func noteDroppedDiscoveries(_ scan: DiscoveryStream?) {
  guard let dropped = scan?.droppedCount, dropped > 0 else { return }
  writeStandardError(
    "blekit: \(dropped) discoveries were dropped: the output fell more than "
      + "\(DiscoveryStream.bufferLimit) behind the scan\n")
}

/// Parses `--service` values.
func parseServiceUUIDs(_ values: [String]) throws(UsageError) -> [BluetoothUUID] {
  var result: [BluetoothUUID] = []
  for value in values {
    do {
      result.append(try BluetoothUUID(value))
    } catch {
      throw .invalid(
        "--service: '\(value)' is not a UUID (use 4 or 8 hex digits, or the 128-bit "
          + "8-4-4-4-12 form)")
    }
  }
  return result
}

/// Validates `--min-rssi`.
func parseRSSIFilter(_ value: Int?) throws(UsageError) -> RSSIFilter {
  do {
    return try RSSIFilter(minimum: value)
  } catch {
    throw .invalid("--min-rssi: \(error.description)")
  }
}

/// Whether standard error is a terminal.
var standardErrorIsTerminal: Bool { Syscall.isatty(STDERR_FILENO) == 1 }

/// Writes text to standard error, unbuffered, after flushing standard output.
func writeStandardError(_ text: String) {
  fflush(nil)
  var bytes = Array(text.utf8)[...]
  while !bytes.isEmpty {
    let written = bytes.withUnsafeBytes { Syscall.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    if written < 0 && errno == EINTR { continue }
    guard written > 0 else { return }
    bytes = bytes.dropFirst(written)
  }
}

/// Writes one line on standard output at once, so a pipe sees each line as it comes. A failed
/// write stops the command (see ``StandardOutput``).
func printLine(_ text: String) {
  StandardOutput.writeOrStop(Array((text + "\n").utf8))
}

/// Writes bytes to standard output, unbuffered. A failed write stops the command (see
/// ``StandardOutput``).
func writeStandardOutput(_ bytes: [UInt8]) {
  StandardOutput.writeOrStop(bytes)
}

/// Seconds since the Unix epoch, with milliseconds, for JSON timestamps.
func unixTime() -> Double {
  var spec = timespec()
  Syscall.clock_gettime(CLOCK_REALTIME, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec / 1_000_000) / 1000
}

/// A duration in seconds as a Double.
func seconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// A tiny JSON writer for one object per line (no Foundation).
enum JSON {
  /// A JSON value.
  indirect enum Value {
    case string(String)
    case number(Double)
    case int(Int)
    case bool(Bool)
    case null
    case array([Value])
    case object([(String, Value)])
  }

  static func text(_ value: Value) -> String {
    switch value {
    case .string(let text): return quoted(text)
    case .number(let number):
      let scaled = (number * 1000).rounded() / 1000
      return scaled == scaled.rounded() ? String(Int(scaled)) : String(scaled)
    case .int(let number): return String(number)
    case .bool(let flag): return flag ? "true" : "false"
    case .null: return "null"
    case .array(let items): return "[" + items.map(text).joined(separator: ",") + "]"
    case .object(let fields):
      return "{" + fields.map { quoted($0.0) + ":" + text($0.1) }.joined(separator: ",") + "}"
    }
  }

  /// `text` as a JSON string literal.
  static func quoted(_ text: String) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count + 2)
    appendQuoted(text, to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  /// Appends `text` as a JSON string literal, as UTF-8 (the live table builds its lines as
  /// bytes). Quotes, backslashes and every control character (C0, DEL and C1, U+0080-U+009F)
  /// are escaped; everything else, other non-ASCII included, is copied as it is.
  static func appendQuoted(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var pendingC2 = false  // a 0xC2 lead byte held back: it may start a C1 control
    for byte in text.utf8 {
      if pendingC2 {
        pendingC2 = false
        if (0x80...0x9F).contains(byte) {
          appendEscape(byte, to: &out)
          continue
        }
        out.append(0xC2)
      }
      switch byte {
      case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
      case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
      case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
      case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
      case 0..<0x20, 0x7F: appendEscape(byte, to: &out)
      case 0xC2: pendingC2 = true
      default: out.append(byte)
      }
    }
    if pendingC2 { out.append(0xC2) }
    out.append(UInt8(ascii: "\""))
  }

  /// Appends `\u00HH` for a code point below U+0100.
  private static func appendEscape(_ value: UInt8, to out: inout [UInt8]) {
    out.append(contentsOf: [
      UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
    ])
    out.append(lowercaseHexDigits[Int(value >> 4)])
    out.append(lowercaseHexDigits[Int(value & 0x0F)])
  }
}

/// ASCII `0`-`9`, `a`-`f`, indexed by value.
let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)
