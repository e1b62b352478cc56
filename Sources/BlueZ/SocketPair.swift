import DBus

// The socket pair behind AcquireNotify and AcquireWrite.
#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Creates a connected `AF_UNIX`/`SOCK_SEQPACKET` pair, non-blocking and close-on-exec: one
/// datagram per notification or write, message boundaries kept.
func makeSeqpacketPair() throws(GattRequestError) -> (ours: FileDescriptor, theirs: FileDescriptor)
{
  var fds: [Int32] = [-1, -1]
  let kind =
    Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
    | Int32(SOCK_CLOEXEC.rawValue)
  let result = fds.withUnsafeMutableBufferPointer { Syscall.socketpair(kind, $0.baseAddress!) }
  guard result == 0 else {
    throw .failed("socketpair: \(String(cString: strerror(errno)))")
  }
  return (FileDescriptor(owning: fds[0]), FileDescriptor(owning: fds[1]))
}
