// The tests' stand-in for a Bluetooth socket: a connected Unix SOCK_SEQPACKET pair.

import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A connected `SOCK_SEQPACKET` pair, close-on-exec: one datagram per send, as bluetoothd's
/// AcquireNotify and AcquireWrite sockets and an L2CAP channel deliver them. Blocking unless
/// `nonBlocking` (both ends `O_NONBLOCK`, as the reactor's callers keep theirs). The caller
/// closes both ends.
public func seqpacketPair(nonBlocking: Bool = false) throws -> (Int32, Int32) {
  var fds: [Int32] = [-1, -1]
  let made = fds.withUnsafeMutableBufferPointer {
    socketpair(
      AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, $0.baseAddress)
  }
  guard made == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
  if nonBlocking {
    for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
  }
  return (fds[0], fds[1])
}

/// Whether `fd` becomes readable (or hangs up) within `limit`. Waits with a task's sleep
/// between looks, never in a blocking `poll`: a test's task that blocks holds one of Swift's
/// cooperative threads (two on a two-core machine), and the library's tasks, its own and
/// those of every test running beside it, wait for as long (two tasks blocked for 3 s held a
/// new task 3 s in a probe on this machine).
public func readable(_ fd: Int32, within limit: Duration) async -> Bool {
  let deadline = ContinuousClock.now + limit
  while true {
    var wanted = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    if poll(&wanted, 1, 0) == 1 { return true }
    if ContinuousClock.now >= deadline { return false }
    try? await Task.sleep(for: .milliseconds(5))
  }
}

/// One datagram from `fd` (read without blocking once ``readable(_:within:)``), or [] when
/// none came within `limit`.
public func datagram(from fd: Int32, within limit: Duration) async -> [UInt8] {
  guard await readable(fd, within: limit) else { return [] }
  var buffer = [UInt8](repeating: 0, count: 1024)
  let count = buffer.withUnsafeMutableBytes {
    recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
  }
  return count > 0 ? Array(buffer[..<count]) : []
}
