// Syscalls: the only file of the DBus module that makes a system call (scripts/check-syscalls
// holds every other file to it).
import CLinux

#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once. None retries `EINTR`: the callers that retry
/// do so in their own loops.
enum Syscall {
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

  // MARK: epoll and eventfd (the Reactor)

  /// `struct epoll_event`.
  typealias EpollEvent = epoll_event
  static let epollIn = EPOLLIN.rawValue
  static let epollOut = EPOLLOUT.rawValue
  static let epollError = EPOLLERR.rawValue
  static let epollHangUp = EPOLLHUP.rawValue
  static let epollOneShot = EPOLLONESHOT.rawValue
  static let epollAdd = EPOLL_CTL_ADD
  static let epollModify = EPOLL_CTL_MOD
  static let epollDelete = EPOLL_CTL_DEL

  /// `epoll_create1(EPOLL_CLOEXEC)`.
  static func epollCreate() -> Int32 {
    epoll_create1(Int32(EPOLL_CLOEXEC))
  }

  /// `epoll_ctl(2)` with `fd` as the event's data.
  static func epollControl(_ epoll: Int32, _ operation: Int32, _ fd: Int32, _ events: UInt32)
    -> Int32
  {
    var event = epoll_event()
    event.events = events
    event.data.fd = fd
    return epoll_ctl(epoll, operation, fd, &event)
  }

  /// `epoll_wait(2)`; `timeout` in milliseconds, -1 for none.
  static func epollWait(
    _ epoll: Int32, _ events: UnsafeMutablePointer<epoll_event>, _ count: Int32,
    _ timeout: Int32
  ) -> Int32 {
    epoll_wait(epoll, events, count, timeout)
  }

  /// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
  static func eventfd() -> Int32 {
    CLinux.eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
  }

  /// Adds one to an eventfd's counter (`write(2)` of a `uint64_t`).
  static func eventfdSignal(_ fd: Int32) {
    var one: UInt64 = 1
    _ = Glibc.write(fd, &one, MemoryLayout<UInt64>.size)
  }

  /// Resets an eventfd's counter (`read(2)` of a `uint64_t`).
  static func eventfdDrain(_ fd: Int32) {
    var value: UInt64 = 0
    _ = Glibc.read(fd, &value, MemoryLayout<UInt64>.size)
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

  /// The calling thread (`pthread_self`).
  static func currentThread() -> pthread_t { pthread_self() }
}

/// The closure a thread of ``Syscall/startDetachedThread(_:)`` runs, boxed for its C entry.
private final class ThreadBody: Sendable {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
