// Syscalls: the only file of the Fleet module that makes a system call (scripts/check-syscalls
// holds every other file to it).
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once.
enum Syscall {
  /// `access(2)`: 0 when the calling process may access `path` as `mode` asks (`R_OK`, ...).
  static func access(_ path: String, _ mode: Int32) -> Int32 {
    Glibc.access(path, mode)
  }

  /// `clock_gettime(2)`.
  @discardableResult
  static func clock_gettime(_ clock: clockid_t, _ time: UnsafeMutablePointer<timespec>) -> Int32 {
    Glibc.clock_gettime(clock, time)
  }
}
