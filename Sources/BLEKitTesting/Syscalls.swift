// Syscalls: the only file of the BLEKitTesting module that makes a system call
// (scripts/check-syscalls holds every other file to it).
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once.
enum Syscall {
  /// `fcntl(2)` with no argument (`F_GETFL`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32) -> Int32 {
    Glibc.fcntl(fd, command)
  }

  /// `fcntl(2)` with an integer argument (`F_SETFL`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    Glibc.fcntl(fd, command, value)
  }

  /// `close(2)`.
  @discardableResult
  static func close(_ fd: Int32) -> Int32 {
    Glibc.close(fd)
  }

  /// `recv(2)`.
  static func recv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: Int32)
    -> Int
  {
    Glibc.recv(fd, buffer, count, flags)
  }

  /// `shutdown(2)`.
  @discardableResult
  static func shutdown(_ fd: Int32, _ how: Int32) -> Int32 {
    Glibc.shutdown(fd, how)
  }

  /// `kill(2)`.
  @discardableResult
  static func kill(_ pid: pid_t, _ signal: Int32) -> Int32 {
    Glibc.kill(pid, signal)
  }
}
