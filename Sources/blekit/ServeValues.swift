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
  /// The counter's next number.
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
    case .file(let path):
      return try Self.read(path)
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

  /// The first `limit` bytes (512: an attribute value) of the file at `path`.
  static func read(_ path: String, limit: Int = ServeProfile.maximumValueLength)
    throws(ServeValueError) -> [UInt8]
  {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw ServeValueError("cannot open \(path): \(errnoText())") }
    defer { close(fd) }
    return try readAll(fd, what: path, limit: limit)
  }

  /// The standard output of `/bin/sh -c command` (standard input from /dev/null), its first
  /// 512 bytes without one trailing newline. A non-zero exit is an error.
  static func run(_ command: String) async throws(ServeValueError) -> [UInt8] {
    let result: Result<[UInt8], ServeValueError> = await withCheckedContinuation { done in
      // posix_spawn and the blocking reads run off the cooperative pool.
      DispatchQueue.global().async { done.resume(returning: runBlocking(command)) }
    }
    return try result.get()
  }

  private static func runBlocking(_ command: String) -> Result<[UInt8], ServeValueError> {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else {
      return .failure(ServeValueError("cannot make a pipe: \(errnoText())"))
    }
    // Neither end leaks into other children; dup2 gives the child its standard output.
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    let arguments = ["/bin/sh", "-c", command].map { (text: String) in strdup(text) }
    defer { for argument in arguments { free(argument) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, arguments + [nil], environ)
    close(fds[1])
    guard spawned == 0 else {
      close(fds[0])
      return .failure(ServeValueError("cannot run /bin/sh: \(String(cString: strerror(spawned)))"))
    }
    let output = Result { () throws(ServeValueError) in try readAll(fds[0], what: "'\(command)'") }
    close(fds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS by hand (macros Swift does not import).
    let exited = status & 0x7F == 0
    let code = (status >> 8) & 0xFF
    guard exited && code == 0 else {
      return .failure(
        ServeValueError(
          exited ? "'\(command)' exited with status \(code)" : "'\(command)' was killed"))
    }
    return output.map { bytes in
      bytes.last == UInt8(ascii: "\n") ? Array(bytes.dropLast()) : bytes
    }
  }

  /// Reads `fd` to its end, keeping the first `limit` bytes (plus one, for a trailing
  /// newline).
  private static func readAll(
    _ fd: Int32, what: String, limit: Int = ServeProfile.maximumValueLength
  ) throws(ServeValueError) -> [UInt8] {
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { throw ServeValueError("cannot read \(what): \(errnoText())") }
      if count == 0 { break }
      if result.count <= limit { result += buffer[..<count] }
    }
    if result.count > limit {
      let keepsNewline = result[limit] == 0x0A
      result = Array(result[..<(limit + (keepsNewline ? 1 : 0))])
    }
    return result
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

/// `strerror(errno)` as a String.
private func errnoText() -> String { String(cString: strerror(errno)) }
