// Syscalls: the only file of the BLEKit module that makes a system call (scripts/check-syscalls
// holds every other file to it).

#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the system calls this module makes, one per libc function, with its
/// arguments and result unchanged: a call returns what libc returns and leaves `errno` as the
/// call set it, for the caller to read at once. None retries `EINTR`: the callers that retry
/// do so in their own loops. Socket-level meaning (L2CAP addresses, options, errors) lives in
/// the callers, such as ``L2CAPSocket``.
enum Syscall {
  // MARK: Descriptors

  /// `fcntl(2)` with no argument (`F_GETFL`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32) -> Int32 {
    Glibc.fcntl(fd, command)
  }

  /// `fcntl(2)` with an integer argument (`F_SETFL`, `F_SETFD`).
  @discardableResult
  static func fcntl(_ fd: Int32, _ command: Int32, _ value: Int32) -> Int32 {
    Glibc.fcntl(fd, command, value)
  }

  /// `ioctl(2)` with a pointer argument (`TIOCOUTQ`, `FIONREAD`).
  static func ioctl(_ fd: Int32, _ request: UInt, _ argument: UnsafeMutableRawPointer) -> Int32 {
    Glibc.ioctl(fd, request, argument)
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

  // MARK: Sockets

  /// `socket(2)`.
  static func socket(_ domain: Int32, _ type: Int32, _ protocol: Int32) -> Int32 {
    Glibc.socket(domain, type, `protocol`)
  }

  /// `bind(2)`.
  static func bind(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    Glibc.bind(fd, address, length)
  }

  /// `listen(2)`.
  static func listen(_ fd: Int32, _ backlog: Int32) -> Int32 {
    Glibc.listen(fd, backlog)
  }

  /// `accept(2)`.
  static func accept(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?,
    _ length: UnsafeMutablePointer<socklen_t>?
  ) -> Int32 {
    Glibc.accept(fd, address, length)
  }

  /// `connect(2)`.
  static func connect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t)
    -> Int32
  {
    Glibc.connect(fd, address, length)
  }

  /// `getsockname(2)`.
  static func getsockname(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>,
    _ length: UnsafeMutablePointer<socklen_t>
  ) -> Int32 {
    Glibc.getsockname(fd, address, length)
  }

  /// `setsockopt(2)`.
  @discardableResult
  static func setsockopt(
    _ fd: Int32, _ level: Int32, _ option: Int32, _ value: UnsafeRawPointer?,
    _ length: socklen_t
  ) -> Int32 {
    Glibc.setsockopt(fd, level, option, value, length)
  }

  /// `getsockopt(2)`.
  static func getsockopt(
    _ fd: Int32, _ level: Int32, _ option: Int32, _ value: UnsafeMutableRawPointer?,
    _ length: UnsafeMutablePointer<socklen_t>
  ) -> Int32 {
    Glibc.getsockopt(fd, level, option, value, length)
  }

  /// `send(2)`.
  static func send(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    Glibc.send(fd, bytes, count, flags)
  }

  /// `recv(2)`.
  static func recv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: Int32)
    -> Int
  {
    Glibc.recv(fd, buffer, count, flags)
  }

  /// `recvmsg(2)`.
  static func recvmsg(_ fd: Int32, _ message: UnsafeMutablePointer<msghdr>, _ flags: Int32) -> Int {
    Glibc.recvmsg(fd, message, flags)
  }

  /// `shutdown(2)`.
  @discardableResult
  static func shutdown(_ fd: Int32, _ how: Int32) -> Int32 {
    Glibc.shutdown(fd, how)
  }

  // MARK: Signals

  /// `sigaction(2)`.
  @discardableResult
  static func sigaction(
    _ number: Int32, _ new: UnsafePointer<Glibc.sigaction>?,
    _ old: UnsafeMutablePointer<Glibc.sigaction>?
  ) -> Int32 {
    callSigaction(number, new, old)
  }

  /// `signal(2)`: the former disposition, or `SIG_ERR`.
  @discardableResult
  static func signal(_ number: Int32, _ handler: __sighandler_t?) -> __sighandler_t? {
    Glibc.signal(number, handler)
  }
}

/// `sigaction` the function: inside `Syscall`, and as `Glibc.sigaction`, the name finds the
/// struct of the same name; at file scope a call with arguments finds the function.
private func callSigaction(
  _ number: Int32, _ new: UnsafePointer<sigaction>?, _ old: UnsafeMutablePointer<sigaction>?
) -> Int32 {
  sigaction(number, new, old)
}
