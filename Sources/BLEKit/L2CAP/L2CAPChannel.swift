// L2CAPChannel: an open LE credit-based channel (CoreBluetooth's CBL2CAPChannel): incoming
// SDUs as an AsyncSequence with a bounded buffer, sends that wait for room, close.
import Bluetooth
import Dispatch
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
///   while the kernel's send buffer is full (the peer has granted no credits). Blocking
///   system calls run on the channel's own dispatch queues, never on Swift's cooperative pool.
/// - ``close()`` ends the channel (an L2CAP Disconnect Request). The peer closing it ends
///   ``incoming`` normally; a lost link ends it with ``L2CAPError/Code-swift.struct/linkLost``.
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
  /// throws ``L2CAPError`` when the link is lost. Iterate it from one task, with one iterator:
  /// dropping an iterator ends the sequence (an `AsyncThrowingStream` underneath), though not
  /// the channel, which only ``close()`` (or dropping the channel) ends.
  public let incoming: SDUs

  let core: L2CAPChannelCore

  /// Takes over a connected socket.
  init(
    fd: Int32, peer: L2CAPSocketAddress, psm: L2CAPPSM, bufferedSDUs: Int = 1024
  ) throws(L2CAPError) {
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
  /// - Throws: ``L2CAPError/Code-swift.struct/tooLarge`` above the MTU (nothing is sent),
  ///   ``L2CAPError/Code-swift.struct/closed`` after either side closed, or the link's error.
  public func send(_ sdu: [UInt8]) async throws(L2CAPError) {
    guard sdu.count <= sendMTU else {
      throw L2CAPError(.tooLarge, "an SDU of \(sdu.count) bytes exceeds the peer's MTU \(sendMTU)")
    }
    try await core.write(sdu)
  }

  /// Sends `bytes` as consecutive SDUs of at most ``sendMTU`` bytes each (a byte stream's
  /// view of the channel; SDU boundaries are not kept for the peer).
  public func write(_ bytes: [UInt8]) async throws(L2CAPError) {
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
  /// throw ``L2CAPError/Code-swift.struct/closed``.
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
    let room: DispatchSemaphore

    public func makeAsyncIterator() -> AsyncIterator {
      AsyncIterator(base: stream.makeAsyncIterator(), room: room)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
      var base: AsyncThrowingStream<[UInt8], any Error>.Iterator
      let room: DispatchSemaphore

      /// The next SDU, nil at the end; throws ``L2CAPError`` when the link was lost.
      public mutating func next() async throws -> [UInt8]? {
        let sdu = try await base.next()
        // One SDU left the buffer: the reader may read one more.
        if sdu != nil { room.signal() }
        return sdu
      }
    }
  }
}

/// The descriptor and its life: one reader queue, one writer queue, and a lock that makes
/// `shutdown` and `close` of the descriptor safe against each other.
///
/// The descriptor is closed only on the writer queue, after the reader has stopped, so no
/// read or write ever runs on a closed (or reused) descriptor; `shutdown` wakes both.
final class L2CAPChannelCore: Sendable {
  private struct State {
    var fd: Int32?
    var closing = false
    var ended = false
    /// What ended the incoming side, for sends that fail after it.
    var endError: L2CAPError?
    /// Reads after which the kernel's receive queue was at least three-quarters full.
    var nearlyFull = 0
  }
  private let state: Mutex<State>
  private let fd: Int32
  let room: DispatchSemaphore
  private let peer: BluetoothAddress
  private let reader = DispatchQueue(label: "blekit.l2cap.read")
  private let writer = DispatchQueue(label: "blekit.l2cap.write")

  /// How long one `send` may wait in the kernel before the channel looks at its state
  /// again. A send waiting for credits sleeps in the kernel, and nothing this process does
  /// is sure to wake it: `shutdown` on a connected LE channel only starts the disconnection,
  /// whose timer is this same timeout (infinite if unset), so a send to a peer that went
  /// silent could wait forever and with it the task that closes the channel. With the
  /// timeout, a waiting send returns `EAGAIN` every so often and ``writeNow(_:)`` retries
  /// unless the channel was closed or ended meanwhile. The kernel's sends are all or
  /// nothing, so a retry never duplicates a byte.
  static let sendWakeInterval: Duration = .milliseconds(500)

  init(fd: Int32, room: Int, peer: BluetoothAddress) {
    self.fd = fd
    self.peer = peer
    L2CAPSocket.setSendTimeout(fd, Self.sendWakeInterval)
    // Created at 0 and raised: libdispatch traps when a semaphore is freed below its initial
    // value, as this one is whenever the channel ends with SDUs taken from the buffer.
    self.room = DispatchSemaphore(value: 0)
    for _ in 0..<room { self.room.signal() }
    state = Mutex(State(fd: fd))
  }

  var isEnded: Bool { state.withLock { $0.ended || $0.closing } }

  var nearlyFull: Int { state.withLock { $0.nearlyFull } }

  /// Starts the reader; the stream holds what it read.
  func start(receiveMTU: Int) -> AsyncThrowingStream<[UInt8], any Error> {
    // Unbounded here, bounded by `room`: the reader waits for room before every read.
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: [UInt8].self, throwing: (any Error).self, bufferingPolicy: .unbounded)
    reader.async { [self] in
      readLoop(continuation, size: max(receiveMTU, 1))
    }
    return stream
  }

  private func readLoop(
    _ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation, size: Int
  ) {
    var buffer = [UInt8](repeating: 0, count: size)
    var failure: L2CAPError?
    while true {
      room.wait()
      if state.withLock({ $0.closing }) { break }
      let count = L2CAPSocket.read(fd, into: &buffer)
      // Still this full after a read: it may have been full before (see L2CAPChannel).
      if let fill = L2CAPSocket.receiveQueueFill(fd), fill.held * 4 >= fill.limit * 3 {
        state.withLock { $0.nearlyFull += 1 }
      }
      if count > 0 {
        continuation.yield(Array(buffer[..<count]))
        continue
      }
      // The end, unless SDUs the kernel had parked (see L2CAPChannel) were moved into the
      // queue by the read that found it empty: then the next read returns them.
      if count == 0 {
        let again = L2CAPSocket.read(fd, into: &buffer)
        if again > 0 {
          continuation.yield(Array(buffer[..<again]))
          continue
        }
        break
      }
      let number = errno
      if state.withLock({ $0.closing }) { break }
      // ECONNRESET: the peer's L2CAP Disconnect Request (its close), or its host ending the
      // link ("remote user terminated"); L2CAP cannot tell these apart: the channel ends.
      if number == ECONNRESET { break }
      failure = Self.linkError(number, peer: peer)
      break
    }
    state.withLock { state in
      state.ended = true
      if state.endError == nil, let failure { state.endError = failure }
    }
    continuation.finish(throwing: failure)
    writer.async { [self] in
      state.withLock { state in
        if let fd = state.fd {
          Syscall.close(fd)
          state.fd = nil
        }
      }
    }
  }

  static func linkError(_ number: Int32, peer: BluetoothAddress) -> L2CAPError {
    var error = L2CAPError.fromErrno(number, "read")
    if error.code == .timedOut { error.code = .linkLost }
    error.message =
      "the link to \(peer) was lost (\(String(cString: strerror(number))))"
    return error
  }

  func write(_ sdu: [UInt8]) async throws(L2CAPError) {
    let result: Result<Void, L2CAPError> = await withCheckedContinuation { continuation in
      writer.async { [self] in
        continuation.resume(returning: writeNow(sdu))
      }
    }
    try result.get()
  }

  private func writeNow(_ sdu: [UInt8]) -> Result<Void, L2CAPError> {
    var number: Int32 = 0
    repeat {
      let open: Int32? = state.withLock { $0.closing || $0.ended ? nil : $0.fd }
      guard let fd = open else { return .failure(closedError()) }
      if L2CAPSocket.write(fd, sdu) >= 0 { return .success(()) }
      number = errno
      // EAGAIN: the send timeout (sendWakeInterval) passed with no room; look again.
    } while number == EAGAIN || number == EWOULDBLOCK
    if state.withLock({ $0.closing || $0.endError != nil }) { return .failure(closedError()) }
    switch number {
    case EPIPE, ECONNRESET, ENOTCONN:
      return .failure(L2CAPError(.closed, "the peer closed the channel", errno: number))
    default:
      return .failure(Self.linkError(number, peer: peer))
    }
  }

  private func closedError() -> L2CAPError {
    state.withLock { state in
      if let error = state.endError { return error }
      return state.closing
        ? L2CAPError(.closed, "the channel is closed")
        : L2CAPError(.closed, "the peer closed the channel")
    }
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
      if let fd = state.fd { Syscall.shutdown(fd, Int32(SHUT_RDWR)) }
      return true
    }
    // Wakes a reader waiting for room.
    if first { room.signal() }
  }
}
