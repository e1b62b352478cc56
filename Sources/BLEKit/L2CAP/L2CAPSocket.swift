// L2CAPSocket: the only file that uses the kernel's Bluetooth socket API (through Syscall): an
// LE L2CAP SEQPACKET socket's system calls, each turned into Swift values and BluetoothError.
#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over one L2CAP socket descriptor. The callers make their descriptors
/// non-blocking (``setNonBlocking(_:)``) and wait on the ``Reactor`` when a call answers
/// `EAGAIN` or `EINPROGRESS`.
enum L2CAPSocket {
  /// `BTPROTO_L2CAP`.
  static let protocolL2CAP: Int32 = 0
  /// `SOL_BLUETOOTH`.
  static let levelBluetooth: Int32 = 274
  /// `BT_SECURITY`, taking `struct bt_security { uint8_t level; uint8_t key_size; }`.
  static let optionSecurity: Int32 = 4
  /// `BT_SNDMTU` and `BT_RCVMTU` (uint16): the SDU sizes of an LE credit-based channel.
  static let optionSendMTU: Int32 = 12
  static let optionReceiveMTU: Int32 = 13
  /// `BT_SECURITY_LOW` (none) and `BT_SECURITY_MEDIUM` (an encrypted link; pairing without
  /// MITM protection is enough).
  static let securityLow: UInt8 = 1
  static let securityMedium: UInt8 = 2

  /// `socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_CLOEXEC, BTPROTO_L2CAP)`.
  static func open() throws(BluetoothError) -> Int32 {
    let fd = Syscall.socket(
      Int32(L2CAPSocketAddress.family),
      Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), protocolL2CAP)
    guard fd >= 0 else {
      let number = errno
      if number == EAFNOSUPPORT {
        throw BluetoothError(
          .l2capUnavailable, "this kernel has no Bluetooth sockets (AF_BLUETOOTH)", errno: number)
      }
      throw .fromErrno(number, "socket")
    }
    return fd
  }

  static func bind(_ fd: Int32, _ address: L2CAPSocketAddress) throws(BluetoothError) {
    let result = address.bytes.withUnsafeBytes { raw in
      Syscall.bind(
        fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
    }
    guard result == 0 else { throw .fromErrno(errno, "bind") }
  }

  static func listen(_ fd: Int32, backlog: Int32 = 4) throws(BluetoothError) {
    guard Syscall.listen(fd, backlog) == 0 else { throw .fromErrno(errno, "listen") }
  }

  /// Takes a channel that came in (on a non-blocking listener: `EAGAIN` when none waits);
  /// returns its descriptor and the peer's address.
  static func accept(_ fd: Int32) throws(BluetoothError) -> (Int32, L2CAPSocketAddress?) {
    var buffer = [UInt8](repeating: 0, count: L2CAPSocketAddress.size)
    var length = socklen_t(buffer.count)
    var client: Int32 = -1
    repeat {
      client = buffer.withUnsafeMutableBytes { raw in
        Syscall.accept(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
      }
    } while client < 0 && errno == EINTR
    guard client >= 0 else { throw .fromErrno(errno, "accept") }
    // (accept4 is not visible through Glibc's module without _GNU_SOURCE.)
    _ = Syscall.fcntl(client, F_SETFD, FD_CLOEXEC)
    return (client, L2CAPSocketAddress(bytes: buffer))
  }

  /// Connects (the kernel also makes the LE link if there is none, and encrypts it first when
  /// the security level asks for it); on a non-blocking socket it answers `EINPROGRESS` and
  /// the socket becomes writable when the channel is open or has failed (``pendingError(_:)``).
  static func connect(_ fd: Int32, _ address: L2CAPSocketAddress) throws(BluetoothError) {
    let result = address.bytes.withUnsafeBytes { raw in
      Syscall.connect(
        fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
    }
    guard result == 0 else { throw .fromErrno(errno, "connect") }
  }

  /// `getsockname`: the local end, whose PSM is the one the kernel picked for a PSM-0 bind.
  static func localAddress(_ fd: Int32) throws(BluetoothError) -> L2CAPSocketAddress {
    var buffer = [UInt8](repeating: 0, count: L2CAPSocketAddress.size)
    var length = socklen_t(buffer.count)
    let result = buffer.withUnsafeMutableBytes { raw in
      Syscall.getsockname(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
    }
    guard result == 0 else { throw .fromErrno(errno, "getsockname") }
    guard let address = L2CAPSocketAddress(bytes: buffer) else {
      throw BluetoothError(.system, "getsockname: not an L2CAP address")
    }
    return address
  }

  /// `SO_SNDTIMEO`; nil is no limit. The sockets here are non-blocking, so no call waits
  /// for it; the kernel also arms a channel's timer with it (`get_sndtimeo` in
  /// `l2cap_chan_connect` and `l2cap_chan_close`, Linux 6.1): how long a connect may take
  /// in the kernel, and how long a closed channel waits for the peer's Disconnect Response.
  /// The kernel's default for L2CAP sockets is 40 s (`L2CAP_CONN_TIMEOUT`).
  static func setSendTimeout(_ fd: Int32, _ duration: Duration?) {
    var value = timeval()
    if let duration {
      value.tv_sec = Int(duration.components.seconds)
      value.tv_usec = Int(duration.components.attoseconds / 1_000_000_000_000)
    }
    _ = Syscall.setsockopt(
      fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
  }

  /// `O_NONBLOCK`: connect, accept, read and write answer `EINPROGRESS` or `EAGAIN` instead of
  /// blocking; the callers then wait on the ``Reactor``.
  static func setNonBlocking(_ fd: Int32) {
    let flags = Syscall.fcntl(fd, F_GETFL)
    if flags >= 0 { Syscall.fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
  }

  /// `SO_ERROR`: the outcome of a non-blocking connect once the socket is writable (0 for
  /// connected), clearing it.
  static func pendingError(_ fd: Int32) -> Int32 {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard Syscall.getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return errno }
    return value
  }

  static func setSecurity(_ fd: Int32, level: UInt8) throws(BluetoothError) {
    var value: (UInt8, UInt8) = (level, 0)
    let result = Syscall.setsockopt(
      fd, levelBluetooth, optionSecurity, &value, socklen_t(MemoryLayout<(UInt8, UInt8)>.size))
    guard result == 0 else { throw .fromErrno(errno, "setsockopt(BT_SECURITY)") }
  }

  static func security(_ fd: Int32) -> UInt8? {
    var value: (UInt8, UInt8) = (0, 0)
    var length = socklen_t(MemoryLayout<(UInt8, UInt8)>.size)
    guard Syscall.getsockopt(fd, levelBluetooth, optionSecurity, &value, &length) == 0 else {
      return nil
    }
    return value.0
  }

  /// The receive MTU every channel of blekit's asks for, instead of the kernel's 672: the
  /// peer may then send SDUs of up to 16 KiB, and the kernel grants it credits for as many
  /// PDUs at the start (about MTU / MPS + 1: 4 at 672 bytes and a 188-byte MPS, 88 at 16 KiB),
  /// so a sender is not held up every few PDUs waiting for credits to come back, which on a
  /// radio takes a connection event or more. A raw single channel carried 2-8 times more
  /// with it (docs/benchmarks.md, L2CAP).
  static let preferredReceiveMTU: UInt16 = 16_384

  /// `BT_RCVMTU` on a socket bound to an LE address and not yet connected or listening (an
  /// accepted channel takes its listener's). Best effort: a kernel that refuses it keeps its
  /// default, which is slower but correct (``L2CAPChannel/receiveMTU`` tells which one holds).
  static func requestReceiveMTU(_ fd: Int32, _ mtu: UInt16) {
    var value = mtu
    _ = Syscall.setsockopt(
      fd, levelBluetooth, optionReceiveMTU, &value, socklen_t(MemoryLayout<UInt16>.size))
  }

  static func mtu(_ fd: Int32, option: Int32) throws(BluetoothError) -> Int {
    var value: UInt16 = 0
    var length = socklen_t(MemoryLayout<UInt16>.size)
    guard Syscall.getsockopt(fd, levelBluetooth, option, &value, &length) == 0 else {
      throw .fromErrno(errno, "getsockopt(MTU)")
    }
    return Int(value)
  }

  /// Bytes the kernel still holds for sending (queued for credits or for the controller):
  /// `SO_SNDBUF` minus what `TIOCOUTQ` reports free.
  static func unsentBytes(_ fd: Int32) -> Int? {
    var free: Int32 = 0
    var size: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard Syscall.ioctl(fd, UInt(TIOCOUTQ), &free) == 0,
      Syscall.getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &length) == 0
    else { return nil }
    return max(0, Int(size) - Int(free))
  }

  /// `SO_MEMINFO`: the socket's memory counters (`u32[SK_MEMINFO_VARS]`), of which the first
  /// two are `SK_MEMINFO_RMEM_ALLOC` (what the receive queue holds, with each buffer's overhead)
  /// and `SK_MEMINFO_RCVBUF` (the limit beyond which the kernel stops queueing).
  static let optionMemoryInfo: Int32 = 55

  /// How full the receive queue is: (bytes held, limit), both as the kernel counts them.
  static func receiveQueueFill(_ fd: Int32) -> (held: Int, limit: Int)? {
    var counters = [UInt32](repeating: 0, count: 16)
    var length = socklen_t(counters.count * MemoryLayout<UInt32>.size)
    let result = counters.withUnsafeMutableBytes {
      Syscall.getsockopt(fd, SOL_SOCKET, optionMemoryInfo, $0.baseAddress, &length)
    }
    guard result == 0, length >= 2 * socklen_t(MemoryLayout<UInt32>.size) else { return nil }
    return (Int(counters[0]), Int(counters[1]))
  }

  /// One SDU into `buffer`; 0 at the end of the channel. Retries EINTR.
  static func read(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
    var count = 0
    repeat {
      count = buffer.withUnsafeMutableBytes { Syscall.read(fd, $0.baseAddress, $0.count) }
    } while count < 0 && errno == EINTR
    return count
  }

  /// One SDU; a SEQPACKET write is all or nothing. Retries EINTR; never raises SIGPIPE.
  static func write(_ fd: Int32, _ bytes: [UInt8]) -> Int {
    var count = 0
    repeat {
      // MSG_NOSIGNAL: a closed peer is an EPIPE to report, not a SIGPIPE ending the process.
      count = bytes.withUnsafeBytes {
        Syscall.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
    } while count < 0 && errno == EINTR
    return count
  }
}
