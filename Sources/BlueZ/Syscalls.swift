// Syscalls: the only file of the BlueZ module that makes a system call (scripts/check-syscalls
// holds every other file to it): the socket pairs behind AcquireNotify and AcquireWrite, and
// the one child process the module starts (`bluetoothd --version`).
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once. None retries `EINTR`: the callers that retry
/// do so in their own loops.
enum Syscall {
  /// `socketpair(2)` in `AF_UNIX`; `kind` may carry `SOCK_NONBLOCK` and `SOCK_CLOEXEC`.
  static func socketpair(_ kind: Int32, _ ends: UnsafeMutablePointer<Int32>) -> Int32 {
    Glibc.socketpair(AF_UNIX, kind, 0, ends)
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

  /// `kill(2)`.
  @discardableResult
  static func kill(_ pid: pid_t, _ signal: Int32) -> Int32 {
    Glibc.kill(pid, signal)
  }

  /// `waitpid(2)`.
  static func waitpid(_ pid: pid_t, _ status: UnsafeMutablePointer<Int32>, _ options: Int32)
    -> pid_t
  {
    Glibc.waitpid(pid, status, options)
  }
}
