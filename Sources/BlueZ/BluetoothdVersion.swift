// BluetoothdVersion: the release of the running bluetoothd, for the few behaviours that nothing
// on D-Bus reveals (a compiled-in default, how a socket handed out earlier behaves).
import Bluetooth
import DBus

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A BlueZ release, e.g. 5.82.
///
/// bluetoothd does not publish its version on D-Bus. ``read(on:)`` asks the program that owns
/// `org.bluez`: the path in its `/proc/PID/cmdline` (world-readable), run with `--version`,
/// which bluetoothd answers with one line (`5.82`) and exits before doing anything else.
/// Use it only for what cannot be probed; prefer the interfaces, properties and answers
/// bluetoothd gives.
public struct BluetoothdVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
  public var major: Int
  public var minor: Int

  public init(_ major: Int, _ minor: Int) {
    self.major = major
    self.minor = minor
  }

  /// Parses `--version`'s answer: `MAJOR.MINOR`, optionally followed by more (`5.82.1`,
  /// `5.66-1`) and white space. `nil` for anything else.
  public init?(parsing text: String) {
    let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
    let trimmed = line.trimmingCharacters(in: " \t\r")
    let parts = trimmed.split(separator: ".", maxSplits: 1)
    guard parts.count == 2, let major = Int(parts[0]), major >= 0, major < 100 else {
      return nil
    }
    let minorDigits = parts[1].prefix { $0.isASCII && $0.isNumber }
    guard !minorDigits.isEmpty, minorDigits.count <= 3, let minor = Int(minorDigits) else {
      return nil
    }
    let rest = parts[1].dropFirst(minorDigits.count)
    guard rest.isEmpty || rest.first == "." || rest.first == "-" || rest.first == "+" else {
      return nil
    }
    self.init(major, minor)
  }

  public static func < (lhs: Self, rhs: Self) -> Bool {
    (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
  }

  public var description: String { "\(major).\(minor)" }

  /// How long ``read(on:)`` lets `bluetoothd --version` run.
  static let probeLimit: Duration = .seconds(2)

  /// The version of the bluetoothd that owns `org.bluez` on `connection`; `nil` when it cannot
  /// be known (nobody owns the name, its command line is unreadable or names a program that
  /// is not called `bluetoothd`, or that program gave no version within two seconds).
  public static func read(on connection: DBusConnection) async -> BluetoothdVersion? {
    guard let pid = try? await connection.processID(of: BlueZ.service) else { return nil }
    guard let program = program(ofProcess: pid) else { return nil }
    return await probe(program: program)
  }

  /// The program a process runs, from its command line's first argument when that is an
  /// absolute path, else from `/proc/PID/exe` (readable only for one's own processes).
  /// Only a program whose file name is `bluetoothd` is returned: nothing else is ever run.
  static func program(ofProcess pid: UInt32) -> String? {
    let arguments =
      SmallFile.read("/proc/\(pid)/cmdline", limit: 64 * 1024).map {
        BluetoothdConfiguration.splitCommandLine($0)
      } ?? []
    var candidate = arguments.first.flatMap { $0.hasPrefix("/") ? $0 : nil }
    if candidate == nil { candidate = symbolicLink("/proc/\(pid)/exe") }
    guard let candidate, isBluetoothd(candidate) else { return nil }
    return candidate
  }

  /// True for an absolute path whose last component is `bluetoothd`.
  static func isBluetoothd(_ path: String) -> Bool {
    path.hasPrefix("/") && path.split(separator: "/").last == "bluetoothd"
  }

  private static func symbolicLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Runs `program --version` with no environment, standard input and error on /dev/null,
  /// and parses the first line it prints; the child is killed after ``probeLimit``.
  static func probe(program: String) async -> BluetoothdVersion? {
    guard let output = await runCapturingOutput(program, ["--version"], limit: probeLimit) else {
      return nil
    }
    return BluetoothdVersion(parsing: String(decoding: output, as: UTF8.self))
  }
}

extension StringProtocol {
  fileprivate func trimmingCharacters(in set: String) -> String {
    var slice = Substring(self)
    while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
    while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
    return String(slice)
  }
}

/// Runs `program` with `arguments`, returning at most 256 bytes of its standard output once it
/// exited with status 0; `nil` on any failure or when it outlives `limit` (it is then killed).
/// Its output is waited for on the process's reactor (no thread is held meanwhile).
func runCapturingOutput(_ program: String, _ arguments: [String], limit: Duration) async
  -> [UInt8]?
{
  // A stream socket pair rather than a pipe: Glibc's module has no pipe2, and both ends must
  // be close-on-exec from their creation (other threads may spawn children meanwhile).
  var pipeEnds: [Int32] = [-1, -1]
  let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
  let made = pipeEnds.withUnsafeMutableBufferPointer {
    Syscall.socketpair(kind, $0.baseAddress!)
  }
  guard made == 0 else { return nil }
  let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
  defer {
    Reactor.shared.release(readEnd)
    Syscall.close(readEnd)
  }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  let argv = ([program] + arguments).map { strdup($0) } + [nil]
  defer { for argument in argv { free(argument) } }
  var environment: [UnsafeMutablePointer<CChar>?] = [nil]
  var pid: pid_t = 0
  let spawned = Syscall.posix_spawn(&pid, program, &actions, nil, argv, &environment)
  Syscall.close(writeEnd)
  guard spawned == 0 else { return nil }
  let deadline = ContinuousClock.now + limit
  var output: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 256)
  var finished = false
  while !finished {
    // The read end stays blocking: a read follows a readiness (or the end of the output).
    guard (try? await Reactor.shared.wait(readEnd, for: .readable, until: deadline)) == .ready
    else { break }
    let count = buffer.withUnsafeMutableBytes { Syscall.read(readEnd, $0.baseAddress, $0.count) }
    if count < 0 && errno == EINTR { continue }
    if count <= 0 {
      finished = true
    } else if output.count < 256 {
      output.append(contentsOf: buffer[..<min(count, 256 - output.count)])
    }
  }
  if !finished { Syscall.kill(pid, SIGKILL) }
  var status: Int32 = 0
  while Syscall.waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  // Exited normally (no signal) with status 0.
  guard finished, status & 0x7f == 0, (status >> 8) & 0xff == 0 else { return nil }
  return output
}
