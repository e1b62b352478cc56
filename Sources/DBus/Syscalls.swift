// Syscalls: the only file of the DBus module that makes a system call (scripts/check-syscalls
// holds every other file to it).
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once. None retries `EINTR`: the callers that retry
/// do so in their own loops.
enum Syscall {
  /// `pipe(2)`.
  @discardableResult
  static func pipe(_ ends: UnsafeMutablePointer<Int32>) -> Int32 {
    Glibc.pipe(ends)
  }

  /// `fcntl(2)` with no argument (`F_GETFL`, `F_GETFD`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32) -> Int32 {
    Glibc.fcntl(fd, command)
  }

  /// `fcntl(2)` with an integer argument (`F_SETFD`, `F_SETFL`, `F_DUPFD_CLOEXEC`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    Glibc.fcntl(fd, command, value)
  }

  /// `dup(2)`.
  static func dup(_ fd: Int32) -> Int32 {
    Glibc.dup(fd)
  }

  /// `close(2)`.
  @discardableResult
  static func close(_ fd: Int32) -> Int32 {
    Glibc.close(fd)
  }

  /// `read(2)`.
  @discardableResult
  static func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    Glibc.read(fd, buffer, count)
  }

  /// `write(2)`.
  @discardableResult
  static func write(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    Glibc.write(fd, bytes, count)
  }

  /// `ioctl(2)` with a pointer argument (`FIONREAD`).
  static func ioctl(_ fd: Int32, _ request: UInt, _ argument: UnsafeMutableRawPointer) -> Int32 {
    Glibc.ioctl(fd, request, argument)
  }

  /// `poll(2)`; `timeout` in milliseconds, -1 for none.
  static func poll(_ fds: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32)
    -> Int32
  {
    Glibc.poll(fds, count, timeout)
  }

  // MARK: Threads

  /// `pthread_create(3)` (a `clone(2)` underneath) of a detached thread that runs `body`, which
  /// it holds until `body` returns. Returns 0, or the error number `pthread_create` gave.
  static func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
      &thread, nil,
      { context in
        Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
      }, context)
    if started == 0 {
      pthread_detach(thread)
    } else {
      Unmanaged<ThreadBody>.fromOpaque(context).release()
    }
    return started
  }
}

/// A detached thread that runs `body` (``Syscall/startDetachedThread(_:)``), for the modules
/// above, which start their threads through this one copy.
package func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
  Syscall.startDetachedThread(body)
}

/// The closure a thread of ``Syscall/startDetachedThread(_:)`` runs, boxed for its C entry.
private final class ThreadBody: Sendable {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
