// L2CAPChannel: an open LE credit-based channel (CoreBluetooth's CBL2CAPChannel): incoming
// SDUs as an AsyncSequence with a bounded buffer, sends that wait for room, close.
import Bluetooth
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// An L2CAP LE connection-oriented channel to one peer: SDUs (service data units, the
/// messages of the channel, each up to its MTU) in both directions.
///
/// - Incoming SDUs arrive in ``incoming`` (one consumer). At most ``bufferedSDUs`` wait
///   there; while the buffer is full the channel stops reading, the kernel stops granting
///   credits, and the peer's sends wait: back-pressure end to end.
///
///   Linux kernels with "Bluetooth: compute LE flow credits based on recvbuf space" (mainline
///   ce60b9231b66; backported to Debian 12's 6.1.0-57 and others) can deliver SDUs out of
///   order, and lose the last ones, once the socket's receive queue has filled: the SDUs that
///   do not fit are parked, an SDU arriving after the reader made room is queued at once
///   ahead of them (the parking is honoured only for ERTM channels in `l2cap_sock_recv_cb`),
///   and parked SDUs still there when the channel closes are freed. The queue fills when this
///   side reads too late (a busy machine, or reading paused): the buffer here is large (1,024
///   SDUs by default), and after every read the channel checks how full the kernel's queue
///   was (`SO_MEMINFO`); ``receiveQueueNearlyFull`` counts the reads that found it at least
///   three-quarters full. Where the order matters, treat a non-zero count as "the order and
///   the end may be wrong" (blekit's `l2cap` pipe exits 12 then) or frame the messages.
/// - ``send(_:)`` hands one SDU to the kernel and returns when it is accepted; it waits
///   while the kernel's send buffer is full (the peer has granted no credits), and a cancelled
///   task stops waiting (``BluetoothError/Code/channelClosed``, the SDU not sent). The
///   socket is non-blocking: reads and sends wait on BLEKit's one reactor thread (epoll),
///   never in a blocking system call.
/// - ``close()`` ends the channel (an L2CAP Disconnect Request). The peer closing it ends
///   ``incoming`` normally; a lost link ends it with ``BluetoothError/Code/linkLost``.
///   L2CAP has no half-close, and the kernel drops what it still holds for sending when the
///   channel closes: call ``drain(timeout:)`` first to close after the last byte went out.
///
/// Closing is idempotent; a channel that is dropped closes itself.
public final class L2CAPChannel: Sendable, CustomStringConvertible {
  /// The peer's address.
  public let peer: BluetoothAddress
  /// The peer's address type (`public` or `random`).
  public let peerAddressType: AddressType
  /// The channel's PSM.
  public let psm: L2CAPPSM
  /// The largest SDU ``send(_:)`` takes (the peer's MTU).
  public let sendMTU: Int
  /// The largest SDU this side accepts: 16,384 on the channels blekit opens and accepts (it
  /// asks the kernel for that instead of its default 672, so that the peer gets credits for
  /// more PDUs at a time).
  public let receiveMTU: Int
  /// Whether the link was encrypted when the channel opened (security level medium or more).
  public let isEncrypted: Bool
  /// How many received SDUs wait at most in ``incoming`` before reading pauses.
  public let bufferedSDUs: Int
  /// The received SDUs; finishes when the peer closes or this side calls ``close()``, and
  /// throws ``BluetoothError`` when the link is lost. Iterate it from one task, with one iterator:
  /// dropping an iterator ends the sequence (an `AsyncThrowingStream` underneath), though not
  /// the channel, which only ``close()`` (or dropping the channel) ends.
  public let incoming: SDUs

  let core: L2CAPChannelCore

  /// Takes over a connected socket.
  init(
    fd: Int32, peer: L2CAPSocketAddress, psm: L2CAPPSM, bufferedSDUs: Int = 1024
  ) throws(BluetoothError) {
    do {
      sendMTU = try L2CAPSocket.mtu(fd, option: L2CAPSocket.optionSendMTU)
      receiveMTU = try L2CAPSocket.mtu(fd, option: L2CAPSocket.optionReceiveMTU)
    } catch {
      Syscall.close(fd)
      throw error
    }
    self.peer = peer.address
    self.peerAddressType = peer.kind.addressType ?? .public
    self.psm = psm
    isEncrypted = (L2CAPSocket.security(fd) ?? 0) >= L2CAPSocket.securityMedium
    self.bufferedSDUs = max(1, bufferedSDUs)
    let core = L2CAPChannelCore(fd: fd, room: self.bufferedSDUs, peer: peer.address)
    self.core = core
    incoming = SDUs(stream: core.start(receiveMTU: receiveMTU), room: core.room)
  }

  /// Takes over a connected `SOCK_SEQPACKET` socket of any family, with the MTUs given (the
  /// framing's tests run over a Unix socket pair: the test machine's kernel may have no
  /// Bluetooth).
  init(seqpacket fd: Int32, sendMTU: Int, receiveMTU: Int, bufferedSDUs: Int = 1024) {
    self.sendMTU = sendMTU
    self.receiveMTU = receiveMTU
    peer = BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0])!
    peerAddressType = .public
    psm = L2CAPPSM(rawValue: 0x80)!
    isEncrypted = false
    self.bufferedSDUs = max(1, bufferedSDUs)
    let core = L2CAPChannelCore(fd: fd, room: self.bufferedSDUs, peer: peer)
    self.core = core
    incoming = SDUs(stream: core.start(receiveMTU: receiveMTU), room: core.room)
  }

  deinit { core.close() }

  public var description: String { "L2CAP channel to \(peer) on PSM \(psm)" }

  /// Sends one SDU of at most ``sendMTU`` bytes; returns once the kernel took it.
  ///
  /// - Throws: ``BluetoothError/Code/sduTooLarge`` above the MTU (nothing is sent),
  ///   ``BluetoothError/Code/channelClosed`` after either side closed, or the link's error.
  public func send(_ sdu: [UInt8]) async throws(BluetoothError) {
    guard sdu.count <= sendMTU else {
      throw BluetoothError(
        .sduTooLarge, "an SDU of \(sdu.count) bytes exceeds the peer's MTU \(sendMTU)")
    }
    try await core.write(sdu)
  }

  /// Sends `bytes` as consecutive SDUs of at most ``sendMTU`` bytes each (a byte stream's
  /// view of the channel; SDU boundaries are not kept for the peer).
  public func write(_ bytes: [UInt8]) async throws(BluetoothError) {
    var start = 0
    while start < bytes.count {
      let end = min(start + sendMTU, bytes.count)
      try await core.write(Array(bytes[start..<end]))
      start = end
    }
  }

  /// Waits until the kernel has handed everything sent so far to the controller, so that a
  /// following ``close()`` loses nothing; at most `timeout`. The kernel signals no such moment,
  /// so this checks its send queue (`TIOCOUTQ`) every few milliseconds.
  ///
  /// - Returns: true when nothing is left, false when the timeout passed or the channel ended.
  @discardableResult
  public func drain(timeout: Duration = .seconds(30)) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
      guard let unsent = core.unsentBytes() else { return false }
      if unsent == 0 { return true }
      guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
      try? await Task.sleep(for: .milliseconds(5))
    }
  }

  /// Closes the channel (both directions). ``incoming`` finishes; pending and later sends
  /// throw ``BluetoothError/Code/channelClosed``.
  public func close() { core.close() }

  /// Whether the channel has ended (closed by either side, or the link lost).
  public var isClosed: Bool { core.isEnded }

  /// How many reads found the kernel's receive queue at least three-quarters full. Zero means
  /// the queue never came near the point where the kernels named above park SDUs (and may
  /// reorder or drop them); non-zero means it may have reached it.
  public var receiveQueueNearlyFull: Int { core.nearlyFull }

  /// The received SDUs of one channel, as an AsyncSequence with a bounded buffer.
  public struct SDUs: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    let stream: AsyncThrowingStream<[UInt8], any Error>
    let room: L2CAPReadCredits

    public func makeAsyncIterator() -> AsyncIterator {
      AsyncIterator(base: stream.makeAsyncIterator(), room: room)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
      var base: AsyncThrowingStream<[UInt8], any Error>.Iterator
      let room: L2CAPReadCredits

      /// The next SDU, nil at the end; throws ``BluetoothError`` when the link was lost.
      public mutating func next() async throws -> [UInt8]? {
        let sdu = try await base.next()
        // One SDU left the buffer: the reader may read one more.
        if sdu != nil { room.give() }
        return sdu
      }
    }
  }
}

/// The descriptor and its life. The descriptor is non-blocking; a reader task reads it and a
/// send writes it, each waiting on the ``Reactor`` when the kernel answers `EAGAIN` (nothing
/// to read; no room to send: the peer granted no credits). Every system call on the
/// descriptor, and its `close`, happens under one lock, so none ever reaches a closed (or
/// reused) descriptor; ``close()`` releases the descriptor's reactor waits, which wakes both
/// sides whatever the kernel does with the `shutdown` (on a connected LE channel it only
/// starts the disconnection, which a silent peer may never finish: a send blocked in the
/// kernel would wait with it).
final class L2CAPChannelCore: Sendable {
  private struct State {
    var fd: Int32?
    var closing = false
    var ended = false
    /// What ended the incoming side, for sends that fail after it.
    var endError: BluetoothError?
    /// Reads after which the kernel's receive queue was at least three-quarters full.
    var nearlyFull = 0
  }
  private let state: Mutex<State>
  let room: L2CAPReadCredits
  private let peer: BluetoothAddress

  /// `SO_SNDTIMEO` of an open channel. No send waits for it (the socket is non-blocking); the
  /// kernel times with it the Disconnect Request that ``close()``'s `shutdown` sends
  /// (`l2cap_chan_close`, Linux 6.1): after it the kernel frees the channel without the peer's
  /// response, so a silent peer does not keep it. 500 ms is the value channels had when it
  /// was also the wake interval of blocking sends; kept unchanged.
  static let disconnectTimeout: Duration = .milliseconds(500)

  init(fd: Int32, room: Int, peer: BluetoothAddress) {
    self.peer = peer
    L2CAPSocket.setSendTimeout(fd, Self.disconnectTimeout)
    L2CAPSocket.setNonBlocking(fd)
    self.room = L2CAPReadCredits(room)
    state = Mutex(State(fd: fd))
  }

  var isEnded: Bool { state.withLock { $0.ended || $0.closing } }

  var nearlyFull: Int { state.withLock { $0.nearlyFull } }

  /// Starts the reader; the stream holds what it read.
  func start(receiveMTU: Int) -> AsyncThrowingStream<[UInt8], any Error> {
    // Unbounded here, bounded by `room`: the reader takes a place before every read.
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: [UInt8].self, throwing: (any Error).self, bufferingPolicy: .unbounded)
    Task.detached { [self] in
      await readLoop(continuation, size: max(receiveMTU, 1))
    }
    return stream
  }

  /// What one read under the lock found.
  private enum ReadStep {
    case sdu([UInt8])
    case wait(ReactorWait)
    case end
    case failed(Int32)
  }

  private func readLoop(
    _ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation, size: Int
  ) async {
    var buffer = [UInt8](repeating: 0, count: size)
    var failure: BluetoothError?
    reading: while await room.take() {
      while true {
        let step = state.withLock { state in readOnce(&state, into: &buffer) }
        switch step {
        case .sdu(let sdu):
          continuation.yield(sdu)
          continue reading
        case .wait(let wait):
          // Not cancellable (the task is the channel's own); close() releases the wait.
          _ = try? await wait.value()
        case .end:
          break reading
        case .failed(let number):
          failure = Self.linkError(number, peer: peer)
          break reading
        }
      }
    }
    state.withLock { state in
      state.ended = true
      if state.endError == nil, let failure { state.endError = failure }
      if let fd = state.fd {
        Reactor.shared.release(fd)
        Syscall.close(fd)
        state.fd = nil
      }
    }
    continuation.finish(throwing: failure)
  }

  /// One read of the descriptor, under the lock.
  private func readOnce(_ state: inout State, into buffer: inout [UInt8]) -> ReadStep {
    guard !state.closing, let fd = state.fd else { return .end }
    var count = L2CAPSocket.read(fd, into: &buffer)
    if count < 0 {
      let number = errno
      if number == EAGAIN || number == EWOULDBLOCK {
        return .wait(Reactor.shared.arm(fd, for: .readable))
      }
      // ECONNRESET: the peer's L2CAP Disconnect Request (its close), or its host ending the
      // link ("remote user terminated"); L2CAP cannot tell these apart: the channel ends.
      return number == ECONNRESET ? .end : .failed(number)
    }
    // Still this full after a read: it may have been full before (see L2CAPChannel).
    if let fill = L2CAPSocket.receiveQueueFill(fd), fill.held * 4 >= fill.limit * 3 {
      state.nearlyFull += 1
    }
    // The end, unless SDUs the kernel had parked (see L2CAPChannel) were moved into the
    // queue by the read that found it empty: then the next read returns them.
    if count == 0 {
      count = L2CAPSocket.read(fd, into: &buffer)
      if count <= 0 { return .end }
    }
    return .sdu(Array(buffer[..<count]))
  }

  static func linkError(_ number: Int32, peer: BluetoothAddress) -> BluetoothError {
    var error = BluetoothError.fromErrno(number, "read")
    if error.code == .timeout { error.code = .linkLost }
    error.message =
      "the link to \(peer) was lost (\(String(cString: strerror(number))))"
    return error
  }

  /// What one send under the lock did.
  private enum WriteStep {
    case sent
    case wait(ReactorWait)
    case failed(BluetoothError)
  }

  /// Sends one SDU, waiting for room (credits) as long as it takes; a cancelled task stops
  /// waiting and throws `channelClosed` (nothing of the SDU was sent).
  func write(_ sdu: [UInt8]) async throws(BluetoothError) {
    while true {
      let step = state.withLock { state in writeOnce(&state, sdu) }
      switch step {
      case .sent:
        return
      case .failed(let error):
        throw error
      case .wait(let wait):
        do {
          _ = try await wait.value()
        } catch {
          throw BluetoothError(
            .channelClosed, "the send was cancelled (nothing of this SDU was sent)")
        }
      }
    }
  }

  /// One send, under the lock. The kernel's sends are all or nothing, so a retry after
  /// `EAGAIN` never duplicates a byte.
  private func writeOnce(_ state: inout State, _ sdu: [UInt8]) -> WriteStep {
    guard !state.closing, !state.ended, let fd = state.fd else {
      return .failed(Self.closedError(state))
    }
    if L2CAPSocket.write(fd, sdu) >= 0 { return .sent }
    let number = errno
    if number == EAGAIN || number == EWOULDBLOCK {
      return .wait(Reactor.shared.arm(fd, for: .writable))
    }
    if state.endError != nil { return .failed(Self.closedError(state)) }
    switch number {
    case EPIPE, ECONNRESET, ENOTCONN:
      return .failed(BluetoothError(.channelClosed, "the peer closed the channel", errno: number))
    default:
      return .failed(Self.linkError(number, peer: peer))
    }
  }

  private static func closedError(_ state: State) -> BluetoothError {
    if let error = state.endError { return error }
    return state.closing
      ? BluetoothError(.channelClosed, "the channel is closed")
      : BluetoothError(.channelClosed, "the peer closed the channel")
  }

  func unsentBytes() -> Int? {
    state.withLock { state in
      guard let fd = state.fd, !state.closing, !state.ended else { return nil }
      return L2CAPSocket.unsentBytes(fd)
    }
  }

  func close() {
    let first = state.withLock { state in
      guard !state.closing else { return false }
      state.closing = true
      if let fd = state.fd {
        Syscall.shutdown(fd, Int32(SHUT_RDWR))
        // Wakes the reader and any send waiting for room; they find `closing` and stop.
        Reactor.shared.release(fd)
      }
      return true
    }
    // Wakes a reader waiting for room.
    if first { room.close() }
  }
}
