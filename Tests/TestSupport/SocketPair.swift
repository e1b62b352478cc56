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
