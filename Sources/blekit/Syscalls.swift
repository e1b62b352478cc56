// Syscalls: the only file of the blekit command that makes a system call (scripts/check-syscalls
// holds every other file to it).
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once. None retries `EINTR`: the callers that retry
/// do so in their own loops.
enum Syscall {
  // MARK: Descriptors

  /// `open(2)` without a mode.
  static func open(_ path: String, _ flags: Int32) -> Int32 {
    Glibc.open(path, flags)
  }

  /// `open(2)` with the mode of a file it creates (`O_CREAT`).
  static func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    Glibc.open(path, flags, mode)
  }

  /// `close(2)`.
  @discardableResult
  static func close(_ fd: Int32) -> Int32 {
    Glibc.close(fd)
  }

  /// `read(2)`.
  static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    Glibc.read(fd, buffer, count)
  }

  /// `write(2)`.
  @discardableResult
  static func write(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    Glibc.write(fd, bytes, count)
  }

  /// `fcntl(2)` without an argument (`F_GETFL`).
  static func fcntl(_ fd: Int32, _ command: Int32) -> Int32 {
    Glibc.fcntl(fd, command)
  }

  /// `fcntl(2)` with an integer argument (`F_SETFL`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    Glibc.fcntl(fd, command, value)
  }

  /// `fstat(2)`.
  static func fstat(_ fd: Int32, _ status: UnsafeMutablePointer<stat>) -> Int32 {
    Glibc.fstat(fd, status)
  }

  /// `isatty(3)` (an `ioctl(2)` underneath): 1 when `fd` is a terminal.
  static func isatty(_ fd: Int32) -> Int32 {
    Glibc.isatty(fd)
  }

  // MARK: Processes

  /// `posix_spawn(3)`: 0, or the error number (it does not set `errno`).
  static func posix_spawn(
    _ pid: UnsafeMutablePointer<pid_t>, _ path: UnsafePointer<CChar>,
    _ actions: UnsafePointer<posix_spawn_file_actions_t>?,
    _ attributes: UnsafePointer<posix_spawnattr_t>?,
    _ arguments: UnsafePointer<UnsafeMutablePointer<CChar>?>,
    _ environment: UnsafePointer<UnsafeMutablePointer<CChar>?>?
  ) -> Int32 {
    Glibc.posix_spawn(pid, path, actions, attributes, arguments, environment)
  }

  /// `waitpid(2)`.
  @discardableResult
  static func waitpid(_ pid: pid_t, _ status: UnsafeMutablePointer<Int32>?, _ options: Int32)
    -> pid_t
  {
    Glibc.waitpid(pid, status, options)
  }

  /// `waitid(2)`.
  static func waitid(
    _ type: idtype_t, _ id: id_t, _ info: UnsafeMutablePointer<siginfo_t>, _ options: Int32
  ) -> Int32 {
    Glibc.waitid(type, id, info, options)
  }

  /// `killpg(3)` (a `kill(2)` of `-group` underneath).
  @discardableResult
  static func killpg(_ group: pid_t, _ signal: Int32) -> Int32 {
    Glibc.killpg(group, signal)
  }

  /// `pidfd_open(2)` (Linux 5.3): a descriptor for the process `pid`, close-on-exec, that
  /// becomes readable when the process exits; -1 and `errno` on failure. Made through
  /// `syscall(2)`: glibc wraps it only from 2.36 on, and blekit otherwise needs only 2.34.
  static func pidfd_open(_ pid: pid_t) -> Int32 {
    Int32(truncatingIfNeeded: system_syscall(pidfdOpenNumber, Int(pid), 0))
  }

  /// `SYS_pidfd_open`, which Glibc's Swift module does not import: 434 on every Linux
  /// architecture (system calls added since Linux 5.1 have one number everywhere).
  private static let pidfdOpenNumber = 434

  /// `signal(2)`: the former disposition, or `SIG_ERR`.
  @discardableResult
  static func signal(_ number: Int32, _ handler: __sighandler_t?) -> __sighandler_t? {
    Glibc.signal(number, handler)
  }

  // MARK: Time

  /// `clock_gettime(2)`.
  @discardableResult
  static func clock_gettime(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>) -> Int32 {
    Glibc.clock_gettime(clock, time)
  }
}

/// `syscall(2)` with two arguments. It is variadic, which Swift does not import; on Linux's
/// x86_64 and aarch64 calling conventions variadic integer arguments travel in the registers
/// fixed ones do, which is where glibc's `syscall` takes them from.
@_silgen_name("syscall")
private func system_syscall(_ number: Int, _ first: Int, _ second: Int) -> Int
