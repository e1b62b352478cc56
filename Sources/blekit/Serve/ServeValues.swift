// Where `blekit serve` gets a characteristic's value at each read or notification: fixed
// bytes, a file, a shell command's output, or a counter.

import BLEKit
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Produces the values of one ``ServeProfile/ValueSource``; a counter's state lives here.
final class ServeValueProducer: Sendable {
  let source: ServeProfile.ValueSource
  /// The counter's next number, or the cycle's next index.
  private let next: Mutex<Int64>

  init(_ source: ServeProfile.ValueSource) {
    self.source = source
    if case .counter(let counter) = source {
      next = Mutex(counter.from)
    } else {
      next = Mutex(0)
    }
  }

  /// The next value, at most 512 bytes (longer file or command output is cut there).
  /// - Throws: a one-line reason (a missing file, a failing command).
  func produce() async throws(ServeValueError) -> [UInt8] {
    switch source {
    case .fixed(let bytes): return bytes
    case .counter(let counter): return counter.bytes(for: step(counter))
    case .cycle(let values):
      let index = next.withLock { index in
        defer { index = (index + 1) % Int64(values.count) }
        return Int(index)
      }
      return values[index]
    case .file(let path):
      return try Self.fileValue(path)
    case .command(let command):
      return try await Self.run(command)
    }
  }

  /// Returns the counter's current number and moves it on, wrapping to `from` past `to`.
  private func step(_ counter: ServeProfile.Counter) -> Int64 {
    next.withLock { value in
      let current = value
      let moved = value + counter.step
      value = (counter.step > 0 ? moved > counter.to : moved < counter.to) ? counter.from : moved
      return current
    }
  }

  /// The first `limit` bytes (512: an attribute value) of the file at `path`, plus one more
  /// when the file has them (a newline there is dropped by the caller; a profile longer than
  /// its limit is refused). Only a regular file is read: it is opened without blocking (a FIFO
  /// with no writer would hold `open` forever) and anything else (a FIFO, a device, a
  /// directory) is refused, since its read could block or never end.
  static func read(_ path: String, limit: Int = ServeProfile.maximumValueLength)
    throws(ServeValueError) -> [UInt8]
  {
    let fd = Syscall.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { throw ServeValueError("cannot open \(path): \(errnoText())") }
    defer { Syscall.close(fd) }
    var status = stat()
    guard Syscall.fstat(fd, &status) == 0 else {
      throw ServeValueError("cannot examine \(path): \(errnoText())")
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      throw ServeValueError(
        "\(path) is not a regular file (\(fileKind(status.st_mode))); only regular files are read")
    }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while result.count <= limit {
      let wanted = min(buffer.count, limit + 1 - result.count)
      let count = buffer.withUnsafeMutableBytes { Syscall.read(fd, $0.baseAddress, wanted) }
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { throw ServeValueError("cannot read \(path): \(errnoText())") }
      if count == 0 { break }
      result += buffer[..<count]
    }
    return result
  }

  /// A file value: its first 512 bytes (an attribute value's most).
  static func fileValue(_ path: String) throws(ServeValueError) -> [UInt8] {
    Array(try read(path).prefix(ServeProfile.maximumValueLength))
  }

  /// The standard output of `/bin/sh -c command` (see ``ServeCommandRunner``), its first 512
  /// bytes without one trailing newline. A non-zero exit or a timeout is an error.
  static func run(_ command: String, runner: ServeCommandRunner = .shared)
    async throws(ServeValueError) -> [UInt8]
  {
    try await runner.run(command, limit: ServeProfile.maximumValueLength)
  }

  /// How `ls -l` would call a file of this mode.
  private static func fileKind(_ mode: mode_t) -> String {
    switch mode & S_IFMT {
    case S_IFIFO: "a FIFO"
    case S_IFCHR: "a character device"
    case S_IFBLK: "a block device"
    case S_IFDIR: "a directory"
    case S_IFSOCK: "a socket"
    default: "not a regular file"
    }
  }
}

extension ServeProfile.Counter {
  /// The counter's value for `number`: the prefix, then the number little-endian.
  func bytes(for number: Int64) -> [UInt8] {
    prefix + (0..<width).map { UInt8(truncatingIfNeeded: number >> (8 * $0)) }
  }
}

/// Why a value could not be produced (the read is refused; the line goes to standard error).
struct ServeValueError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
