// The built `blekit fleet` as a child process on a pseudo-terminal (what an operator's
// terminal receives, byte for byte) or with its output on pipes, its resident memory sampled
// from /proc while it runs.

import Foundation
import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One finished run of the built blekit.
struct FleetChildRun {
  /// The exit status (`128 + N` when killed by signal N).
  var status: Int32
  /// What the terminal received (standard output and error together), or standard output.
  var output: [UInt8]
  /// Standard error, when it was not the terminal.
  var error: [UInt8]
  /// The largest VmRSS seen, in KiB.
  var maximumRSS: Int
  /// Whether the run was killed at its time limit.
  var killed: Bool

  var errorText: String { String(decoding: error, as: UTF8.self) }
  var outputText: String { String(decoding: output, as: UTF8.self) }
}

enum FleetChild {
  /// Runs the built blekit with `arguments`; on a pseudo-terminal in raw mode (so the bytes
  /// read are exactly the bytes written) when `terminal`, else with standard output and error
  /// on pipes. Killed after `limit` seconds. Blocks: call it from a thread of its own.
  static func run(_ arguments: [String], terminal: Bool, limit: Double) throws -> FleetChildRun {
    guard let executable = builtBlekit else { throw ChildError("build the blekit product first") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var master: Int32 = -1
    var slave: Int32 = -1
    var pipes: [ChildPipe] = []
    if terminal {
      // posix_openpt, unlockpt and ptsname as Linux's ioctls (Glibc's Swift module does not
      // declare them): TIOCSPTLCK (0x40045431) with 0 unlocks, TIOCGPTN (0x80045430) numbers.
      master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
      var unlock: Int32 = 0
      var number: Int32 = 0
      guard master >= 0, ioctl(master, UInt(0x4004_5431), &unlock) == 0,
        ioctl(master, UInt(0x8004_5430), &number) == 0
      else { throw ChildError("no pseudo-terminal: \(String(cString: strerror(errno)))") }
      let path = "/dev/pts/\(number)"
      slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
      guard slave >= 0 else { throw ChildError("cannot open \(path)") }
      var mode = termios()
      tcgetattr(slave, &mode)
      cfmakeraw(&mode)
      tcsetattr(slave, TCSANOW, &mode)
      var size = winsize(ws_row: 50, ws_col: 200, ws_xpixel: 0, ws_ypixel: 0)
      _ = ioctl(slave, UInt(TIOCSWINSZ), &size)
      for fd: Int32 in [0, 1, 2] {
        posix_spawn_file_actions_adddup2(&actions, slave, fd)
      }
    } else {
      pipes = [try ChildPipe(), try ChildPipe()]
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
      posix_spawn_file_actions_adddup2(&actions, pipes[0].writing.fileDescriptor, 1)
      posix_spawn_file_actions_adddup2(&actions, pipes[1].writing.fileDescriptor, 2)
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    let argv0 = [executable.path] + arguments
    var argv: [UnsafeMutablePointer<CChar>?] = argv0.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid = pid_t()
    let code = posix_spawn(&pid, executable.path, &actions, &attributes, &argv, environ)
    if slave >= 0 { close(slave) }
    for pipe in pipes { try pipe.writing.close() }
    guard code == 0 else {
      if master >= 0 { close(master) }
      throw ChildError("posix_spawn: \(code)")
    }
    let readers =
      terminal
      ? [DescriptorReader(master)]
      : pipes.map { DescriptorReader($0.reading.fileDescriptor) }
    var maximumRSS = 0
    var killed = false
    var status: Int32 = 0
    let deadline = Date().addingTimeInterval(limit)
    while true {
      let reaped = waitpid(pid, &status, WNOHANG)
      if reaped == pid { break }
      if reaped < 0 && errno == ECHILD {
        // Reaped by someone else (Foundation reaps the children it started, by pid only;
        // this guards the loop should that change).
        status = 0x7F00
        break
      }
      maximumRSS = max(maximumRSS, residentKiB(pid))
      if Date() > deadline, !killed {
        kill(pid, SIGKILL)
        killed = true
      }
      usleep(50_000)
    }
    let collected = readers.map { $0.wait() }
    if master >= 0 { close(master) }
    let exit =
      (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    return FleetChildRun(
      status: exit, output: collected[0], error: collected.count > 1 ? collected[1] : [],
      maximumRSS: maximumRSS, killed: killed)
  }

  /// VmRSS of a process in KiB (0 when it cannot be read).
  static func residentKiB(_ pid: pid_t) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
  }

  struct ChildError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
  }
}

/// Reads a descriptor to its end (or EIO: a pseudo-terminal whose other side is closed) on a
/// thread of its own.
final class DescriptorReader: @unchecked Sendable {
  private let done = DispatchSemaphore(value: 0)
  private var bytes: [UInt8] = []

  init(_ fd: Int32) {
    Thread { [self] in
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = read(fd, &buffer, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        bytes += buffer[0..<count]
      }
      done.signal()
    }.start()
  }

  /// Everything read, once the end came.
  func wait() -> [UInt8] {
    done.wait()
    return bytes
  }
}
