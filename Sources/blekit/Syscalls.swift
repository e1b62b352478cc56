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

  /// `poll(2)`; `timeout` in milliseconds, -1 for none.
  static func poll(_ fds: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32)
    -> Int32
  {
    Glibc.poll(fds, count, timeout)
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

  /// `usleep(3)` (a `nanosleep(2)` underneath).
  @discardableResult
  static func usleep(_ microseconds: useconds_t) -> Int32 {
    Glibc.usleep(microseconds)
  }
}
