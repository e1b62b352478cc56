// Standard output: written with write(2), its failures reported (never dropped), and what a
// terminal is shown of data that came from a peer.

import ArgumentParsing
import BLEKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The process's standard output.
///
/// Every write goes straight to file descriptor 1. The first failure (a closed pipe, a full
/// disk: `blekit receive >/dev/full`) is kept and stops the command: ``onFailure`` cancels the
/// command's task, which then unregisters what it registered, and the process exits with
/// ``ArgumentParsing/ExitStatus/outputFailed`` and one line on standard error. SIGPIPE is
/// ignored (``ignoreBrokenPipe()``), so a closed pipe is an `EPIPE` error like any other
/// rather than a kill without cleanup.
enum StandardOutput {
  private static let failure = Mutex<String?>(nil)
  private static let cancel = Mutex<(@Sendable () -> Void)?>(nil)

  /// Whether standard output is a terminal.
  static var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

  /// The first write failure, as one line (`cannot write to standard output: Broken pipe`).
  static var failureMessage: String? { failure.withLock { $0 } }

  /// Sets what runs on the first failure (the entry point cancels the command).
  static func onFailure(_ action: @escaping @Sendable () -> Void) {
    cancel.withLock { $0 = action }
  }

  /// Turns SIGPIPE's default action (terminate at once) off, so writes to a closed pipe fail
  /// with `EPIPE` and the command can clean up.
  static func ignoreBrokenPipe() {
    signal(SIGPIPE, SIG_IGN)
  }

  /// Writes all of `bytes`.
  /// - Throws: a `CLIError` with status ``ArgumentParsing/ExitStatus/outputFailed`` when the
  ///   write fails (also after an earlier failure).
  static func write(_ bytes: [UInt8]) throws(CLIError) {
    if let message = writeAll(bytes) { throw CLIError(.outputFailed, message) }
  }

  /// Writes all of `bytes`; a failure is recorded and stops the command (see the type's
  /// description). For output whose caller has no error path (a table redrawn by a timer).
  static func writeOrStop(_ bytes: [UInt8]) {
    _ = writeAll(bytes)
  }

  /// Writes, records the first failure, and returns its message (`nil` when all was written).
  private static func writeAll(_ bytes: [UInt8]) -> String? {
    if let earlier = failureMessage { return earlier }
    var rest = bytes[...]
    while !rest.isEmpty {
      let written = rest.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
      if written < 0 && errno == EINTR { continue }
      guard written > 0 else {
        let reason = written < 0 ? String(cString: strerror(errno)) : "nothing was written"
        let message = "cannot write to standard output: \(reason)"
        let isFirst = failure.withLock { recorded in
          guard recorded == nil else { return false }
          recorded = message
          return true
        }
        if isFirst, let action = cancel.withLock({ $0 }) { action() }
        return message
      }
      rest = rest.dropFirst(written)
    }
    return nil
  }
}

/// What a terminal is shown of bytes that came from a peer: a peer's text must not move the
/// cursor, retitle the window or hide earlier output.
enum TerminalText {
  /// `bytes` for a terminal: UTF-8 text with every control character other than newline and
  /// tab shown as `\xHH` (C0, DEL, C1: `"a\u{1B}[2J"` becomes `a\x1b[2J`) and a final newline
  /// if it lacks one; bytes that are not UTF-8 as hex, 16 bytes a line.
  static func show(_ bytes: [UInt8]) -> [UInt8] {
    guard let text = String(validating: bytes, as: UTF8.self) else {
      return Array(hexLines(bytes).utf8)
    }
    var out = Array(visible(text).utf8)
    if out.last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
    return out
  }

  /// `text` with control characters other than newline and tab written as `\xHH`.
  static func visible(_ text: String) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
      let value = scalar.value
      let isControl = value < 0x20 || (0x7F...0x9F).contains(value)
      if isControl && scalar != "\n" && scalar != "\t" {
        out += [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        out.append(lowercaseHexDigits[Int(value >> 4)])
        out.append(lowercaseHexDigits[Int(value & 0x0F)])
      } else {
        out += Array(String(scalar).utf8)
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Hex, 16 bytes a line with the offset: `00000000  de ad be ef`.
  static func hexLines(_ bytes: [UInt8]) -> String {
    guard !bytes.isEmpty else { return "\n" }
    var lines = ""
    for start in stride(from: 0, to: bytes.count, by: 16) {
      let offset = String(start, radix: 16)
      lines += String(repeating: "0", count: max(0, 8 - offset.count)) + offset + " "
      for byte in bytes[start..<min(start + 16, bytes.count)] {
        lines += " " + HexBytes.format([byte])
      }
      lines += "\n"
    }
    return lines
  }
}

/// Base64 (RFC 4648, with padding), for bytes in JSON.
enum Base64 {
  private static let alphabet: [UInt8] = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  /// `[0x66, 0x6F, 0x6F]` is `"Zm9v"`; `[0x66]` is `"Zg=="`.
  static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
      let count = min(3, bytes.count - index)
      var group = UInt32(bytes[index]) << 16
      if count > 1 { group |= UInt32(bytes[index + 1]) << 8 }
      if count > 2 { group |= UInt32(bytes[index + 2]) }
      for position in 0..<4 {
        if position <= count {
          out.append(alphabet[Int(group >> UInt32(18 - 6 * position) & 0x3F)])
        } else {
          out.append(UInt8(ascii: "="))
        }
      }
      index += 3
    }
    return String(decoding: out, as: UTF8.self)
  }
}
