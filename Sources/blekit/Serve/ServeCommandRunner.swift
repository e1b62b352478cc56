// Runs `blekit serve`'s per-read shell commands as a supervisor would: each in its own process
// group with default signal handling, within a time limit, its output capped, a bounded number
// at once, and none left behind when blekit exits.

import BLEKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Runs `/bin/sh -c COMMAND` for a characteristic's value.
///
/// - The child starts with every signal at its default action and none blocked (blekit ignores
///   SIGINT, SIGTERM, SIGHUP and SIGPIPE for itself; a child that inherited that would survive
///   Ctrl-C and write forever into a closed pipe), in a process group of its own, with its
///   standard input from /dev/null and its standard output a pipe that is close-on-exec from
///   its creation (`pipe2`), so no other child started meanwhile holds it open.
/// - It has ``timeout`` to write its output and exit; past that, or once more than the value's
///   length has come, its process group gets SIGTERM, then SIGKILL after ``stopGrace``.
/// - At most ``concurrency`` commands run at once; a read beyond that is refused at once rather
///   than queued behind commands that may hang.
/// - Every group still running is killed when blekit exits, however it exits
///   (``ChildProcessGroups``).
final class ServeCommandRunner: Sendable {
  /// 10 s: the central's read waits for this answer, and ATT gives a request 30 s (Core
  /// Specification Vol 3 Part F 3.3.3) before the central's stack drops the bearer; an error
  /// well before that keeps the link usable.
  static let defaultTimeout: Duration = .seconds(10)
  /// Four: each running command holds a process, a pipe and a pidfd (no thread: its waits are
  /// on BLEKit's reactor); a value that takes longer than a read allows is better refused than
  /// stacked up.
  static let defaultConcurrency = 4
  /// How long a stopped command's group has between SIGTERM and SIGKILL.
  static let stopGrace: Duration = .milliseconds(500)

  /// The runner serve's values share (the cap counts every characteristic's commands).
  static let shared = ServeCommandRunner()

  let timeout: Duration
  let concurrency: Int
  private let running = Mutex(0)

  init(timeout: Duration = defaultTimeout, concurrency: Int = defaultConcurrency) {
    self.timeout = timeout
    self.concurrency = concurrency
  }

  /// The standard output of `/bin/sh -c command`, its first `limit` bytes without one trailing
  /// newline. A non-zero exit, a timeout, or too many commands running is an error. Output
  /// beyond `limit` bytes is not read: the command is stopped and its first bytes are the value.
  ///
  /// The command is seen to its end (its output, its exit or its limit, its reaping) by a task
  /// of its own, which the caller's cancellation does not reach: a started command always ends
  /// the same way. That task holds no thread while it waits: the child's output and its exit
  /// are waited for on BLEKit's reactor.
  func run(_ command: String, limit: Int) async throws(ServeValueError) -> [UInt8] {
    let admitted = running.withLock { count in
      guard count < concurrency else { return false }
      count += 1
      return true
    }
    guard admitted else {
      throw ServeValueError(
        "'\(command)' not started: \(concurrency) commands are already running")
    }
    defer { running.withLock { $0 -= 1 } }
    let supervision = Task { await self.supervise(command, limit: limit) }
    return try await supervision.value.get()
  }

  private enum Ending { case endOfOutput, capped, timedOut }

  /// A started command: its process (the leader of its group), a pidfd on it, and the read end
  /// of its standard output (non-blocking).
  private struct Child {
    let pid: pid_t
    let pidfd: Int32
    let output: Int32
  }

  /// Sets `attributes` for a child in a process group of its own, with every signal at its
  /// default action and none blocked.
  static func defaultSignals(_ attributes: inout posix_spawnattr_t) {
    // All bits set by hand: sigfillset leaves out glibc's two internal real-time signals (32
    // and 33), which a child would then inherit ignored.
    var defaults = sigset_t()
    withUnsafeMutableBytes(of: &defaults) { $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var mask = sigset_t()
    sigemptyset(&mask)
    posix_spawnattr_setsigmask(&attributes, &mask)
    posix_spawnattr_setpgroup(&attributes, 0)
    posix_spawnattr_setflags(
      &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
  }

  private func supervise(_ command: String, limit: Int) async -> Result<[UInt8], ServeValueError> {
    let child: Child
    switch Self.start(command) {
    case .success(let started): child = started
    case .failure(let error): return .failure(error)
    }
    defer { Self.close(child.pidfd) }
    let deadline = ContinuousClock.now + timeout
    var output: [UInt8] = []
    let read = await Self.readOutput(child.output, into: &output, limit: limit, until: deadline)
    Self.close(child.output)
    let ending: Ending
    switch read {
    case .success(let end): ending = end
    case .failure(let error):
      await stop(child)
      return .failure(error)
    }
    if ending == .endOfOutput, let exit = await Self.waitForExit(child, until: deadline) {
      // Its group may hold what it started in the background: those go with it.
      Syscall.killpg(child.pid, SIGKILL)
      await Self.reap(child)
      ChildProcessGroups.finished(child.pid)
      switch exit {
      case .exited(0): break
      case .exited(let code):
        return .failure(ServeValueError("'\(command)' exited with status \(code)"))
      case .killed: return .failure(ServeValueError("'\(command)' was killed"))
      }
      return .success(output.last == UInt8(ascii: "\n") ? Array(output.dropLast()) : output)
    }
    await stop(child)
    if ending == .capped {
      let keepsNewline = output[limit] == 0x0A
      return .success(Array(output[..<(limit + (keepsNewline ? 1 : 0))]).dropLastNewline())
    }
    return .failure(
      ServeValueError(
        "'\(command)' did not finish within \(Self.seconds(timeout)) s; its process group was "
          + "stopped"))
  }

  /// Starts `/bin/sh -c command` with its standard output a pipe, and opens a pidfd on it.
  private static func start(_ command: String) -> Result<Child, ServeValueError> {
    var fds: [Int32] = [-1, -1]
    guard system_pipe2(&fds, O_CLOEXEC) == 0 else {
      return .failure(ServeValueError("cannot make a pipe: \(errnoText())"))
    }
    // Only blekit's end is non-blocking (the two ends are separate open files): the child's
    // standard output stays as every program expects it.
    guard Syscall.fcntl(fds[0], F_SETFL, Syscall.fcntl(fds[0], F_GETFL) | O_NONBLOCK) == 0 else {
      let error = ServeValueError("cannot make a pipe: \(errnoText())")
      for fd in fds { Syscall.close(fd) }
      return .failure(error)
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    // dup2 leaves the child's standard output without close-on-exec; both pipe ends close.
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    // Nothing else of blekit's (or of a library's that forgot close-on-exec) reaches it.
    system_posix_spawn_file_actions_addclosefrom_np(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    Self.defaultSignals(&attributes)
    let arguments = ["/bin/sh", "-c", command].map { (text: String) in strdup(text) }
    defer { for argument in arguments { free(argument) } }
    var pid: pid_t = 0
    // posix_spawn returns its error rather than setting errno.
    var spawnError: Int32 = 0
    let spawned = ChildProcessGroups.spawning {
      spawnError = Syscall.posix_spawn(
        &pid, "/bin/sh", &actions, &attributes, arguments + [nil], environ)
      return spawnError == 0 ? pid : nil
    }
    Syscall.close(fds[1])
    guard spawned != nil else {
      Syscall.close(fds[0])
      return .failure(
        ServeValueError("cannot run /bin/sh: \(String(cString: strerror(spawnError)))"))
    }
    // The child is not reaped before blekit reaps it, so its pid cannot name another process.
    let pidfd = Syscall.pidfd_open(pid)
    guard pidfd >= 0 else {
      let error = ServeValueError("cannot watch /bin/sh (pidfd_open): \(errnoText())")
      Syscall.close(fds[0])
      Syscall.killpg(pid, SIGKILL)
      var status: Int32 = 0
      while Syscall.waitpid(pid, &status, 0) < 0 && errno == EINTR {}
      ChildProcessGroups.finished(pid)
      return .failure(error)
    }
    return .success(Child(pid: pid, pidfd: pidfd, output: fds[0]))
  }

  /// Takes `fd` out of the reactor and closes it.
  private static func close(_ fd: Int32) {
    Reactor.shared.release(fd)
    Syscall.close(fd)
  }

  /// Waits on BLEKit's reactor for `fd` to become readable, until `deadline` if one is given.
  /// The supervising task is never cancelled; a cancellation would read as `.cancelled`.
  private static func readable(_ fd: Int32, until deadline: ContinuousClock.Instant?) async
    -> ReactorWait.Wake
  {
    (try? await Reactor.shared.wait(fd, for: .readable, until: deadline)) ?? .cancelled
  }

  /// Reads the child's output until its end, `limit` + 1 bytes (one more than is kept, to see
  /// a newline there), or the deadline.
  private static func readOutput(
    _ fd: Int32, into output: inout [UInt8], limit: Int, until deadline: ContinuousClock.Instant
  ) async -> Result<Ending, ServeValueError> {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      guard ContinuousClock.now < deadline else { return .success(.timedOut) }
      let wanted = min(buffer.count, limit + 1 - output.count)
      let count = buffer.withUnsafeMutableBytes { Syscall.read(fd, $0.baseAddress, wanted) }
      let error = count < 0 ? errno : 0
      if count == 0 { return .success(.endOfOutput) }
      if count > 0 {
        output += buffer[..<count]
        if output.count > limit { return .success(.capped) }
        continue
      }
      if error == EINTR { continue }
      guard error == EAGAIN else {
        return .failure(
          ServeValueError("cannot read the command's output: \(String(cString: strerror(error)))"))
      }
      switch await readable(fd, until: deadline) {
      case .ready: continue
      case .timedOut: return .success(.timedOut)
      case .released, .cancelled:
        return .failure(ServeValueError("cannot wait for the command's output"))
      }
    }
  }

  enum Exit: Equatable {
    case exited(Int32)
    case killed
  }

  /// How the child ended once it has exited (it stays a zombie, holding its process group's
  /// number, until ``reap(_:)``), or nil at the deadline: its pidfd becomes readable when it
  /// exits, then `waitid` with `WNOWAIT` reads how, leaving it unreaped.
  private static func waitForExit(_ child: Child, until deadline: ContinuousClock.Instant) async
    -> Exit?
  {
    while true {
      guard await readable(child.pidfd, until: deadline) == .ready else { return nil }
      var info = siginfo_t()
      var result: Int32
      repeat {
        result = Syscall.waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOHANG | WNOWAIT)
      } while result < 0 && errno == EINTR
      guard result == 0 else { return nil }
      if info.si_signo == SIGCHLD {
        return info.si_code == CLD_EXITED ? .exited(info._sifields._sigchld.si_status) : .killed
      }
      // Not expected: Linux makes the pidfd readable when the process is a zombie, which
      // waitid then reports. Waited for again rather than taken for an exit.
    }
  }

  /// SIGTERM to the child's group, SIGKILL after ``stopGrace`` (or at once when the leader has
  /// gone, for what it left in the group), then reaps the leader.
  private func stop(_ child: Child) async {
    Syscall.killpg(child.pid, SIGTERM)
    _ = await Self.waitForExit(child, until: .now + Self.stopGrace)
    Syscall.killpg(child.pid, SIGKILL)
    await Self.reap(child)
    ChildProcessGroups.finished(child.pid)
  }

  /// Reaps the leader once it has exited (it has, or has been sent SIGKILL), waiting for that
  /// on the reactor rather than in `waitpid`.
  private static func reap(_ child: Child) async {
    _ = await readable(child.pidfd, until: nil)
    var status: Int32 = 0
    while Syscall.waitpid(child.pid, &status, 0) < 0 && errno == EINTR {}
  }

  private static func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
  }

  private static func seconds(_ duration: Duration) -> String {
    let milliseconds = milliseconds(duration)
    return milliseconds % 1000 == 0
      ? "\(milliseconds / 1000)" : String(Double(milliseconds) / 1000)
  }
}

extension Array where Element == UInt8 {
  fileprivate func dropLastNewline() -> [UInt8] {
    last == UInt8(ascii: "\n") ? Array(dropLast()) : self
  }
}

/// The process groups of commands blekit started and has not yet reaped, killed when blekit
/// exits: at the end of `main`, at a second signal, and when a watchdog ends a stuck command,
/// by blekit itself; and when blekit is killed outright (SIGKILL, a crash), when no code of it
/// runs, by a guardian: a small shell in a process group of its own, started with the first
/// command, that reads each group's number on a pipe from blekit and kills those still listed
/// when the pipe's end shows that blekit is gone.
enum ChildProcessGroups {
  private struct State {
    var live: Set<pid_t> = []
    /// The write end of the guardian's pipe (close-on-exec), and the guardian's pid.
    var guardian: (pipe: Int32, pid: pid_t)?
  }
  private static let state = Mutex(State())

  /// The guardian: `+PGID` adds a group, `-PGID` drops one (reaped: its number may be reused);
  /// at the end of its input it kills what is left. It ignores the terminal's signals (it is
  /// not in the terminal's foreground group anyway) so that only the end of blekit ends it.
  static let guardianScript = """
    trap '' HUP INT TERM QUIT
    groups=' '
    while IFS= read -r line; do
      case $line in
        +*) groups="$groups${line#+} " ;;
        -*) kept=' '
            for g in $groups; do [ "$g" = "${line#-}" ] || kept="$kept$g "; done
            groups=$kept ;;
      esac
    done
    for g in $groups; do kill -KILL -"$g" 2>/dev/null; done
    """

  /// Runs `spawn` (which returns the new child's pid, or nil) under the registry's lock, so an
  /// exit that kills every group cannot pass between a spawn and its registration.
  static func spawning(_ spawn: () -> pid_t?) -> pid_t? {
    state.withLock { state in
      if state.guardian == nil { state.guardian = startGuardian() }
      let pid = spawn()
      if let pid {
        state.live.insert(pid)
        tell(state.guardian, "+\(pid)")
      }
      return pid
    }
  }

  /// The child was reaped: its number may be reused.
  static func finished(_ pid: pid_t) {
    state.withLock { state in
      if state.live.remove(pid) != nil { tell(state.guardian, "-\(pid)") }
    }
  }

  /// Sends SIGKILL to every group still registered.
  static func killAll() {
    state.withLock { state in
      for pid in state.live {
        Syscall.killpg(pid, SIGKILL)
        tell(state.guardian, "-\(pid)")
      }
      state.live.removeAll()
    }
  }

  /// How many commands are running (for tests).
  static var count: Int { state.withLock { $0.live.count } }

  /// What the kernel does to the guardian's pipe when blekit dies, for tests: closes it, waits
  /// for the guardian to act and exit, and lets the next command start a new one.
  static func closeGuardianForTesting() {
    let guardian = state.withLock { state in
      defer { state.guardian = nil }
      return state.guardian
    }
    guard let guardian else { return }
    Syscall.close(guardian.pipe)
    var status: Int32 = 0
    while Syscall.waitpid(guardian.pid, &status, 0) < 0 && errno == EINTR {}
  }

  private static func tell(_ guardian: (pipe: Int32, pid: pid_t)?, _ line: String) {
    guard let guardian else { return }
    // A line is far below PIPE_BUF: written whole or not at all. Should the guardian be gone,
    // EPIPE (SIGPIPE is ignored by blekit) only loses the protection it gave.
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { Syscall.write(guardian.pipe, $0.baseAddress, $0.count) }
  }

  /// Starts the guardian; nil (no guardian: blekit's own exit paths still kill the groups)
  /// when it cannot be started.
  private static func startGuardian() -> (pipe: Int32, pid: pid_t)? {
    var fds: [Int32] = [-1, -1]
    guard system_pipe2(&fds, O_CLOEXEC) == 0 else { return nil }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    system_posix_spawn_file_actions_addclosefrom_np(&actions, 3)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    ServeCommandRunner.defaultSignals(&attributes)
    let arguments = ["/bin/sh", "-c", guardianScript].map { (text: String) in strdup(text) }
    defer { for argument in arguments { free(argument) } }
    var pid: pid_t = 0
    let spawned = Syscall.posix_spawn(
      &pid, "/bin/sh", &actions, &attributes, arguments + [nil], environ)
    Syscall.close(fds[0])
    guard spawned == 0 else {
      Syscall.close(fds[1])
      return nil
    }
    return (fds[1], pid)
  }
}

/// glibc's `pipe2` (Linux 2.6.27), which Glibc's Swift module leaves out (it is declared only
/// under `_GNU_SOURCE`): a pipe whose ends are close-on-exec from their creation.
@_silgen_name("pipe2")
private func system_pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34; Debian 12 has 2.36), also
/// declared only under `_GNU_SOURCE`: the child closes every descriptor from `from` on.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func system_posix_spawn_file_actions_addclosefrom_np(
  _ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32
) -> Int32

/// `strerror(errno)` as a String.
func errnoText() -> String { String(cString: strerror(errno)) }
