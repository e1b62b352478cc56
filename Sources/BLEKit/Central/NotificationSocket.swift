// NotificationSocket: reads AcquireNotify's SOCK_SEQPACKET fd on the reactor's thread, one
// notification per recvmsg(), and hands over what one burst of reads brought as one batch.
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The reader of one AcquireNotify socket.
///
/// Each `recvmsg(2)` on the SOCK_SEQPACKET socket yields exactly one notification value; the
/// buffer is as large as the MTU (at least 512 bytes, the longest attribute value), so no
/// value is truncated. The ``Reactor`` watches the socket and, when it is readable, runs the
/// reader on its thread, which reads holding the reader's lock. The fd is closed (which
/// unsubscribes in bluetoothd) when the reader has ended or is cancelled.
///
/// An empty value is a value. bluetoothd writes a zero-length notification as an empty
/// datagram, and on a Unix SOCK_SEQPACKET socket an empty datagram and the end of the stream
/// both read as 0 bytes, with the same `poll` events and `FIONREAD`. What tells them apart is
/// ancillary data: the reader sets `SO_PASSCRED` on its end, so the kernel attaches the
/// sender's credentials (`SCM_CREDENTIALS`) to every datagram it hands over, empty or not, and
/// none to the end of the stream (Linux's `unix_dgram_recvmsg` and `scm_recv`; seen on 6.18,
/// also for datagrams queued before the option was set). A read of 0 bytes with control data (or
/// `MSG_CTRUNC`) is an empty value; one without is the end. Should `SO_PASSCRED` be refused,
/// the reader falls back to taking every 0-byte read as the end.
///
/// Why a reactor watch and not a wait that a task awaits, or a Dispatch read source: on a link
/// that brings one value at a time (a radio sends a few per connection event), either of
/// those wakes a second thread (a task's executor, Dispatch's worker and manager threads) to
/// read before the consumer is woken (a Dispatch source: four thread wake-ups per value,
/// measured with `strace -f -c` under `scripts/bench-receive --interval 20`). The reactor's
/// thread is woken by the kernel and reads at once. Why a lock and not a serial queue entered
/// with `sync`:
/// Dispatch's `sync` cost about 2,400 instructions per wake-up (callgrind, same benchmark),
/// more than reading and reassembling a value.
///
/// Each wake-up reads until the socket is empty and hands the values over in order, in batches
/// of at most `batchLimit` (one `onValues` call per batch, not per value: the consumer's cost
/// per hand-over is paid once per batch), or, once diverted (``divert(to:signal:)``), lends the
/// burst to a sink that reads each value's bytes where they were read, with no array per value
/// (``Burst``). Every value read is handed over before `onEnd`.
/// Both are called with the lock held, so they must not call back into the reader but
/// through its queue (every method here does). Meanwhile a ``NotificationBacklog`` measures
/// how far the reads fell behind, which tells whether bluetoothd may have dropped a value,
/// and a ``KernelATTQueueWatch`` samples the kernel's ATT queues, which tells whether the
/// kernel may have (``lossCheck(within:)``).
///
/// Ending: the first end (EOF, a read error, ``finish(after:)`` or ``cancel()``) sets `ended`
/// and shuts the socket down under the lock, which wakes the reactor with a hang-up; the
/// reader's handler learns of the end under the lock, after that, and only then ends the watch
/// and closes the fd, on the reactor's thread: no `shutdown` and no read can reach the fd's
/// number after it was closed (and perhaps reused).
final class NotificationSocket: Sendable {
  private let fd: Int32
  /// Whose thread reads the socket.
  private let reactor: Reactor
  /// Where the calls from outside (cancel, finish, loss check, perform) run, each taking the
  /// lock: none of them waits for the reader's current burst.
  private let queue = DispatchQueue(label: "blekit.notification-socket")
  private let onValues: @Sendable ([[UInt8]]) -> Void
  private let onEnd: @Sendable ((any Error)?) -> Void
  /// Everything the reading changes, under one lock.
  private let state: Mutex<ReaderState>

  fileprivate struct ReaderState: Sendable {
    /// Set once the reader has ended (EOF, error or cancel), together with the socket's
    /// shutdown.
    var ended = false
    /// The backlog meter.
    var backlog = NotificationBacklog()
    /// The watch on the kernel's ATT queues.
    var attQueue: KernelATTQueueWatch
    /// Where each value is read into (one value long at most).
    var buffer: [UInt8]
    /// Where each datagram's control data (its `SCM_CREDENTIALS`) is read into.
    var control = [UInt8](repeating: 0, count: NotificationSocket.controlSize)
    /// The batch being read, kept between wake-ups with its capacity.
    var batch: [[UInt8]] = []
    /// Where each burst goes once diverted (``divert(to:signal:)``), instead of a batch.
    var sink: BurstSink?
    /// Wakes the diverted consumer: called at the switch and whenever `sink` returns true.
    var signal: (@Sendable () -> Void)?
  }

  /// A consumer that reads each burst itself, on the reader's thread with its lock held (a
  /// diverted transfer): true when its owner must be woken (it is done, or has failed).
  typealias BurstSink = @Sendable (inout Burst) -> Bool

  /// Why a burst of reads stopped.
  enum BurstEnd {
    /// The socket is empty (`EAGAIN`, or on the reactor's thread nothing behind the last
    /// value read).
    case empty
    /// The end of the stream (a 0-byte read without control data).
    case closed
    /// A read failed with this errno.
    case failed(Int32)
  }

  /// The reads of one wake-up, lent to a diverted consumer (``BurstSink``) on the reader's
  /// thread with its lock held. Each ``next(_:)`` reads one value and lends its bytes (in the
  /// reader's own buffer, valid during the call) to `body`: the consumer copies what it keeps,
  /// and no value becomes an array of its own. Valid only during the call it is lent to; the
  /// reader reads (and drops) whatever the consumer left unread when it returns.
  struct Burst: ~Copyable {
    fileprivate let socket: NotificationSocket
    fileprivate let state: UnsafeMutablePointer<ReaderState>
    /// Why the reads stopped, once they have.
    fileprivate(set) var end: BurstEnd?
    /// Whether the burst may stop when `FIONREAD`, taken after a read, finds nothing behind
    /// it, rather than read once more for `EAGAIN`: only where the reactor's level-triggered
    /// watch calls the reader again for what that figure cannot show (an empty value, which
    /// adds nothing to it, or one that came after it).
    fileprivate let stopsWhenQueueEmpty: Bool
    /// Set when a read found nothing queued behind it (and the burst may stop there).
    private var queueEmpty = false

    fileprivate init(
      socket: NotificationSocket, state: UnsafeMutablePointer<ReaderState>,
      stopsWhenQueueEmpty: Bool
    ) {
      self.socket = socket
      self.state = state
      self.stopsWhenQueueEmpty = stopsWhenQueueEmpty
    }

    /// Reads the next value and returns what `body` made of its bytes; `nil` once the socket
    /// is empty or has ended (``end`` says which).
    mutating func next<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
      guard end == nil else { return nil }
      if queueEmpty {
        end = .empty
        return nil
      }
      while true {
        let (count, datagram, code) = socket.receive(&state.pointee)
        if count > 0 || (count == 0 && datagram) {
          if state.pointee.backlog.needsSnapshot {
            // Taken after the read (the value just read and what is queued behind it): when
            // nothing is, the burst ends without the read that would answer `EAGAIN`, one
            // system call of the two a slow link's value costs.
            let behind = socket.queuedBytes()
            state.pointee.backlog.snapshot(queuedBytes: behind + count)
            queueEmpty = stopsWhenQueueEmpty && behind == 0
          }
          state.pointee.backlog.record(valueLength: count)
          state.pointee.attQueue.valueRead()
          return state.pointee.buffer.withUnsafeBytes {
            body(UnsafeRawBufferPointer(rebasing: $0[..<count]))
          }
        }
        if count == 0 {
          end = .closed
          return nil
        }
        if code == EINTR { continue }
        end = code == EAGAIN || code == EWOULDBLOCK ? .empty : .failed(code)
        return nil
      }
    }
  }

  /// The most values handed over in one batch: a long burst is handed over in parts, so the
  /// consumer can start on it while the rest is read.
  static let batchLimit = 256

  /// Room for one `SCM_CREDENTIALS` message (`CMSG_SPACE(sizeof(struct ucred))`, 32 bytes on
  /// 64-bit Linux) and then some; a larger one is cut and flagged `MSG_CTRUNC`, which still
  /// marks a datagram.
  static let controlSize = 64

  /// Whether the kernel marks every datagram of this socket with control data
  /// (`SO_PASSCRED` set), which tells an empty value from the end of the stream.
  private let marksDatagrams: Bool

  /// Starts reading `fd` (whose ownership passes to the reader). When the reactor cannot watch
  /// it, the reader ends at once with an error (and closes `fd`).
  init(
    fd: Int32, mtu: Int, attQueue: KernelATTQueueWatch = KernelATTQueueWatch(),
    reactor: Reactor = .shared,
    onValues: @escaping @Sendable ([[UInt8]]) -> Void,
    onEnd: @escaping @Sendable ((any Error)?) -> Void
  ) {
    self.fd = fd
    self.state = Mutex(
      ReaderState(attQueue: attQueue, buffer: [UInt8](repeating: 0, count: max(mtu, 512))))
    self.onValues = onValues
    self.onEnd = onEnd
    let flags = Syscall.fcntl(fd, F_GETFL)
    _ = Syscall.fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    var on: Int32 = 1
    self.marksDatagrams =
      Syscall.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
    self.reactor = reactor
    let watched = reactor.watch(fd) { [self] event in self.readable(event) }
    if !watched {
      queue.async {
        self.state.withLock { state in
          self.end(
            &state,
            BluetoothError(.system, "the notification socket cannot be watched (epoll refused it)"))
        }
        Syscall.close(fd)
      }
    }
  }

  /// Stops reading and closes the fd, without reporting an end.
  func cancel() {
    queue.async {
      self.state.withLock { state in
        if !state.ended {
          state.ended = true
          Syscall.shutdown(self.fd, Int32(SHUT_RDWR))
        }
      }
    }
  }

  /// From the next burst on, hands every burst to `sink` instead of `onValues`, and calls
  /// `signal` at the switch (with the reader's lock held: after every batch already handed
  /// over and before the next, so no value is lost or reordered) and whenever `sink` returns
  /// true.
  func divert(to sink: @escaping BurstSink, signal: @escaping @Sendable () -> Void) {
    queue.async {
      self.state.withLock { state in
        state.sink = sink
        state.signal = signal
        signal()
      }
    }
  }

  /// The reactor's handler: reads what is there, and once the reader has ended, ends the watch
  /// and closes the fd (here, on the reactor's thread, where no other read of it can run).
  private func readable(_ event: Reactor.WatchEvent) {
    let over = state.withLock { state in
      drain(&state, thenEndWith: nil, onReactor: true)
      // An error or hang-up without input that the reads did not end on (a Unix socket reports
      // a hang-up with input, and an error to the read): ended rather than watched again,
      // which would call this at once, over and over.
      if !state.ended, event.failed, !event.readable {
        end(&state, BluetoothError(.disconnected, "reading notifications failed (socket error)"))
      }
      return state.ended
    }
    if over {
      reactor.release(fd)
      Syscall.close(fd)
    }
  }

  /// Reads whatever is already queued on the socket, then ends with `error` (used when the
  /// peer disconnected: values sent before the cut are still delivered first).
  func finish(after error: any Error) {
    queue.async { self.state.withLock { self.drain(&$0, thenEndWith: error) } }
  }

  /// What the reader can tell of values bluetoothd dropped, once every value that was in the
  /// socket when this was called has been read (the reader's queue runs this after its current
  /// burst). A reader still busy after `limit` (a peer that keeps sending) counts as one that
  /// may have missed values.
  func lossCheck(within limit: Duration) async -> NotificationLossCheck {
    let answer = Mutex<CheckedContinuation<NotificationLossCheck, Never>?>(nil)
    return await withCheckedContinuation { continuation in
      answer.withLock { $0 = continuation }
      let give: @Sendable (NotificationLossCheck) -> Void = { check in
        answer.withLock { $0.take() }?.resume(returning: check)
      }
      queue.async {
        let (meter, kernel) = self.state.withLock { state in
          self.drain(&state, thenEndWith: nil)
          return (state.backlog, state.attQueue)
        }
        if meter.suspected {
          give(.mayHaveDropped(peakBytes: meter.peak, limit: meter.limit))
        } else if kernel.suspected, let queued = kernel.peak {
          give(.kernelMayHaveDropped(queuedBytes: queued, limit: kernel.limit))
        } else {
          give(.noneDropped(peakBytes: meter.peak, limit: meter.limit))
        }
      }
      let seconds = limit.components
      let nanoseconds =
        Int(seconds.seconds) * 1_000_000_000
        + Int(seconds.attoseconds / 1_000_000_000)
      DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) {
        give(.stillReading(after: limit))
      }
    }
  }

  /// FIONREAD: the bytes of every value queued on the socket (SOCK_SEQPACKET), or 0.
  fileprivate func queuedBytes() -> Int {
    var queued: Int32 = 0
    return Syscall.ioctl(fd, UInt(FIONREAD), &queued) == 0 ? Int(queued) : 0
  }

  /// Reads every value available now and hands them over in batches (or to the sink, once
  /// diverted); ends on EOF, on a socket error, or (when given) with `error` once the socket is
  /// empty. `onReactor`: called by the reactor's watch, which calls it again while the socket
  /// is readable, so a burst may end where `FIONREAD` shows nothing more (``Burst``); other
  /// callers read until `EAGAIN`. Runs with the lock held.
  private func drain(
    _ state: inout ReaderState, thenEndWith error: (any Error)?, onReactor: Bool = false
  ) {
    guard !state.ended else { return }
    let stop = withUnsafeMutablePointer(to: &state) { state -> BurstEnd in
      var burst = Burst(socket: self, state: state, stopsWhenQueueEmpty: onReactor)
      if let sink = state.pointee.sink {
        if sink(&burst) { state.pointee.signal?() }
        // What the sink left unread is read and dropped: it had what it wanted.
        while burst.next({ _ in }) != nil {}
      } else {
        var batch: [[UInt8]] = []
        swap(&batch, &state.pointee.batch)
        while let value = burst.next({ Array($0) }) {
          batch.append(value)
          if batch.count == Self.batchLimit {
            onValues(batch)
            batch.removeAll(keepingCapacity: true)
          }
        }
        if !batch.isEmpty { onValues(batch) }
        batch.removeAll(keepingCapacity: true)
        swap(&batch, &state.pointee.batch)
      }
      return burst.end ?? .empty
    }
    state.backlog.drained()
    switch stop {
    case .closed:
      end(
        &state,
        error ?? BluetoothError(.disconnected, "the notification socket was closed by bluetoothd"))
    case .empty:
      if let error { end(&state, error) }
    case .failed(let code):
      end(
        &state,
        BluetoothError(
          .disconnected, "reading notifications failed: \(String(cString: strerror(code)))"))
    }
  }

  /// Reads one datagram into `state.buffer`: its length (or -1 and the errno), and whether a
  /// datagram was read at all (control data came with it), which a length of 0 needs to tell
  /// an empty value from the end of the stream. Runs with the lock held.
  fileprivate func receive(_ state: inout ReaderState) -> (count: Int, datagram: Bool, error: Int32)
  {
    state.buffer.withUnsafeMutableBytes { buffer in
      state.control.withUnsafeMutableBytes { control in
        var vector = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
        return withUnsafeMutablePointer(to: &vector) { vector in
          var message = msghdr()
          message.msg_iov = vector
          message.msg_iovlen = 1
          if marksDatagrams {
            message.msg_control = control.baseAddress
            message.msg_controllen = control.count
          }
          let count = Syscall.recvmsg(fd, &message, 0)
          let error = count < 0 ? errno : 0
          let datagram =
            count >= 0 && marksDatagrams
            && (message.msg_controllen > 0 || message.msg_flags & Int32(MSG_CTRUNC) != 0)
          return (count, datagram, error)
        }
      }
    }
  }

  /// Ends the reader (once: `drain` returns early after an end) and wakes the reactor's
  /// handler with a hang-up, which then closes the fd. Runs with the lock held.
  private func end(_ state: inout ReaderState, _ error: (any Error)?) {
    state.ended = true
    Syscall.shutdown(fd, Int32(SHUT_RDWR))
    onEnd(error)
  }
}
