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
  static var isTerminal: Bool { Syscall.isatty(STDOUT_FILENO) == 1 }

  /// The first write failure, as one line (`cannot write to standard output: Broken pipe`).
  static var failureMessage: String? { failure.withLock { $0 } }

  /// Sets what runs on the first failure (the entry point cancels the command).
  static func onFailure(_ action: @escaping @Sendable () -> Void) {
    cancel.withLock { $0 = action }
  }

  /// Turns SIGPIPE's default action (terminate at once) off, so writes to a closed pipe fail
  /// with `EPIPE` and the command can clean up.
  static func ignoreBrokenPipe() {
    Syscall.signal(SIGPIPE, SIG_IGN)
  }

  /// Writes all of `bytes`.
  /// - Throws: a `CLIError` with status ``ArgumentParsing/ExitStatus/outputFailed`` when the
  ///   write fails (also after an earlier failure).
  static func write(_ bytes: [UInt8]) throws(CLIError) {
    if let message = writeAll(bytes) { throw CLIError(.outputFailed, message) }
  }

  /// Writes bytes a peer sent (a received message, an L2CAP SDU, a central's write): on a pipe
  /// or a file exactly as they came (binary-safe); on a terminal through
  /// ``TerminalText/show(_:)``, so that a peer's controls, DEL, bidi and format characters are
  /// shown escaped instead of moving the cursor or retitling the window, bytes that are not
  /// UTF-8 as hex lines, and each write ends a line.
  /// - Throws: as ``write(_:)``.
  static func writePeerBytes(_ bytes: [UInt8]) throws(CLIError) {
    try write(isTerminal ? TerminalText.show(bytes) : bytes)
  }

  /// ``writePeerBytes(_:)`` for a caller with no error path: a failure is recorded and stops
  /// the command, as in ``writeOrStop(_:)``.
  static func writePeerBytesOrStop(_ bytes: [UInt8]) {
    writeOrStop(isTerminal ? TerminalText.show(bytes) : bytes)
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
      let written = rest.withUnsafeBytes { Syscall.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
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
