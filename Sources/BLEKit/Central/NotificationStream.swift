// NotificationStream: one characteristic's notifications, received in batches (all that one
// read burst brought) and handed out one value at a time.
import Synchronization

/// How a ``NotificationStream`` receives values.
public enum NotificationMethod: Sendable, Hashable {
  /// Through AcquireNotify's socket: one value per read, with the MTU bluetoothd gave.
  case acquiredSocket(mtu: Int)
  /// Through StartNotify and PropertiesChanged(Value) signals.
  case startNotify
}

/// What a ``NotificationStream`` can tell of values bluetoothd dropped before they reached it
/// (``NotificationStream/lossCheck()``).
///
/// bluetoothd drops a notification it cannot write to a full AcquireNotify socket; the socket
/// fills when its reader falls about 170 (MTU 247 and above) to 280 (MTU 23) values behind. The
/// reader measures its backlog in the kernel memory the unread values hold (`peakBytes`)
/// against a `limit` of two fifths of bluetoothd's send buffer, low enough that a backlog that
/// filled it is never missed. Before that, the kernel drops ATT notifications that do not fit
/// bluetoothd's own socket when bluetoothd falls behind; no client sees those drops, but the
/// reader samples how deep the kernel's L2CAP queues get (`/proc/net/l2cap`) and reports a
/// queue that reached half its buffer: a sampled sign that can miss a short burst.
public enum NotificationLossCheck: Sendable, Hashable {
  /// The consumer fell ``NotificationStream/bufferLimit`` values behind, and the stream
  /// dropped `count` values that arrived while it held that many unread
  /// (``NotificationStream/droppedValues``). Reported before any other finding, on both paths.
  case droppedUnread(count: Int, limit: Int)
  /// The backlog stayed under the limit: bluetoothd's socket never filled, it dropped nothing.
  case noneDropped(peakBytes: Int, limit: Int)
  /// The backlog reached the limit: bluetoothd may have dropped values.
  case mayHaveDropped(peakBytes: Int, limit: Int)
  /// The socket's backlog stayed under its limit, but a sample of the kernel's L2CAP receive
  /// queues (bluetoothd's ATT sockets among them) found one holding `queuedBytes`, at least
  /// half its buffer: bluetoothd fell behind the peer, and the kernel may have dropped
  /// notifications before bluetoothd read them. (The queues are not told apart: another busy
  /// L2CAP connection on the host can raise this too.)
  case kernelMayHaveDropped(queuedBytes: Int, limit: Int)
  /// The reader was still reading the socket after this long (a peer that keeps sending): the
  /// check could not finish, so values may have been dropped.
  case stillReading(after: Duration)
  /// The values came through StartNotify's signals, where no such sign exists.
  case notObservable

  /// Whether values may have been lost on the way (every case but
  /// ``noneDropped(peakBytes:limit:)``).
  public var lossPossible: Bool {
    if case .noneDropped = self { false } else { true }
  }

  /// The most kernel memory the socket's unread values held, when it was measured (not the
  /// kernel queue of ``kernelMayHaveDropped(queuedBytes:limit:)``).
  public var peakBytes: Int? {
    switch self {
    case .noneDropped(let peak, _), .mayHaveDropped(let peak, _): peak
    case .droppedUnread, .kernelMayHaveDropped, .stillReading, .notObservable: nil
    }
  }

  /// One line for a user: what was measured, and what it means.
  public var reason: String {
    switch self {
    case .droppedUnread(let count, let limit):
      "\(count) notifications were dropped: the stream held \(limit) values its consumer had not "
        + "read yet"
    case .noneDropped(let peak, let limit):
      "the notification socket's backlog peaked at \(peak) bytes of kernel memory, under the "
        + "\(limit) at which bluetoothd may drop values"
    case .mayHaveDropped(let peak, let limit):
      "the notification socket's backlog reached \(peak) bytes of kernel memory (limit \(limit)): "
        + "the receiver fell far enough behind that bluetoothd may have dropped notifications"
    case .kernelMayHaveDropped(let queued, let limit):
      "an L2CAP receive queue in the kernel held \(queued) bytes (limit \(limit)): bluetoothd fell "
        + "behind the peer, and the kernel may have dropped notifications before it read them"
    case .stillReading(let after):
      "the notification socket was still being read \(after) after the end of the message"
    case .notObservable:
      "the notifications came as D-Bus signals (StartNotify), where dropped values leave no sign"
    }
  }
}

/// The notifications (or indications) of one characteristic, in arrival order
/// (CoreBluetooth's `setNotifyValue(true, for:)` and `didUpdateValueFor`).
///
/// Values are buffered until read, up to ``bufferLimit`` unread values. A consumer that falls
/// that far behind (a slow standard output, a terminal paused with Ctrl-S) loses the values
/// that arrive while the buffer is full: they are dropped and counted, never silently:
/// ``droppedValues`` counts them and ``lossCheck()`` reports them
/// (``NotificationLossCheck/droppedUnread(count:limit:)``). The values kept stay in order. The
/// newest are dropped, not the buffered ones, as bluetoothd and the kernel drop what does not
/// fit their queues. Values can also be lost before they reach the stream, when the peer sends
/// faster than the host takes them: the kernel drops ATT notifications that do not fit bluetoothd's socket (ATT has no
/// flow control), and bluetoothd drops a value it cannot write to a full AcquireNotify socket
/// (it logs `sendmsg: Resource temporarily unavailable`). Values that must all arrive need
/// numbers of their own (as blekit's sequenced transfer frames have); without them,
/// ``lossCheck()`` tells whether either drop point may have been reached. Ending the iteration,
/// cancelling it, or ``stop()`` unsubscribes. If the peripheral disconnects, values already
/// received are still delivered, then the sequence throws ``BluetoothError/Code/disconnected``;
/// it never hangs.
public struct NotificationStream: AsyncSequence, Sendable {
  public typealias Element = [UInt8]
  public typealias Failure = any Error
  /// The values in batches, in order: the socket reader hands over every value one read burst
  /// brought as one element (the StartNotify path, one value per element).
  let batches: AsyncThrowingStream<[[UInt8]], any Error>
  let subscription: NotificationSubscription
  /// How values arrive.
  public let method: NotificationMethod
  /// The socket's reader (AcquireNotify only), for ``lossCheck()``.
  let reader: NotificationSocket?
  /// Where the reader's batches go (AcquireNotify only): see ``divert(to:)``.
  let route: BatchRoute?
  /// The count of unread values against ``bufferLimit``, and of the values dropped at it.
  let buffer: NotificationBuffer

  init(
    batches: AsyncThrowingStream<[[UInt8]], any Error>, buffer: NotificationBuffer,
    subscription: NotificationSubscription, method: NotificationMethod,
    reader: NotificationSocket?, route: BatchRoute? = nil
  ) {
    self.batches = batches
    self.buffer = buffer
    self.subscription = subscription
    self.method = method
    self.reader = reader
    self.route = route
  }

  /// The most values a stream holds that its consumer has not read yet: 8,192. Values of
  /// up to 512 bytes (ATT's longest attribute value) make that at most about 4.5 MiB per
  /// stream. It is more than a minute of a sensor notifying at 100 Hz, and several seconds of
  /// the fastest LE link; a consumer further behind than that is not keeping up, and values
  /// that arrive while the stream is full are dropped and counted (``droppedValues``). A
  /// transfer's diverted values (handed to its reassembly as they are read) are not buffered,
  /// so they do not count.
  public static let bufferLimit = 8_192

  /// How many values arrived while ``bufferLimit`` values waited unread, and were dropped.
  /// A consumer that may fall behind (one that writes to a pipe or a terminal) reads this when
  /// it stops; ``lossCheck()`` reports it too.
  public var droppedValues: Int { buffer.dropped }

  /// How long ``lossCheck()`` waits for the reader to empty the socket.
  public static let lossCheckLimit: Duration = .seconds(2)

  /// Whether bluetoothd may have dropped values on their way to this stream, judged once
  /// every value already in its socket has been read (at most ``lossCheckLimit`` later). Call
  /// it after the values that matter have arrived: a receiver that needs every value (a
  /// message without numbers of its own, such as Apple's plain transfer chunks) should not
  /// trust them when this says ``NotificationLossCheck/mayHaveDropped(peakBytes:limit:)``.
  public func lossCheck() async -> NotificationLossCheck {
    let check: NotificationLossCheck
    if let reader {
      check = await reader.lossCheck(within: Self.lossCheckLimit)
    } else {
      check = .notObservable
    }
    let dropped = buffer.dropped
    return dropped > 0 ? .droppedUnread(count: dropped, limit: buffer.limit) : check
  }

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(batches: batches.makeAsyncIterator(), buffer: buffer)
  }

  /// Unsubscribes and waits until bluetoothd has been told (StopNotify answered, or the
  /// socket closed). Safe to call more than once.
  public func stop() async {
    await subscription.stop()
  }

  /// Hands out the values one by one, in arrival order; waits for more only when every value
  /// received so far has been handed out.
  public struct AsyncIterator: AsyncIteratorProtocol {
    public typealias Element = [UInt8]
    public typealias Failure = any Error
    private var batches: AsyncThrowingStream<[[UInt8]], any Error>.Iterator
    /// Told of each batch taken out of the stream, which makes room for more.
    private let buffer: NotificationBuffer
    /// The batch being handed out, and the position of its next value.
    private var batch: [[UInt8]] = []
    private var position = 0

    init(
      batches: AsyncThrowingStream<[[UInt8]], any Error>.Iterator, buffer: NotificationBuffer
    ) {
      self.batches = batches
      self.buffer = buffer
    }

    /// The next value, or `nil` once the stream has ended.
    public mutating func next() async throws -> [UInt8]? {
      try await next(isolation: nil)
    }

    /// The next value, or `nil` once the stream has ended; waits (if it must) on `actor`.
    public mutating func next(isolation actor: isolated (any Actor)?) async throws -> [UInt8]? {
      guard try await refill(isolation: actor) else { return nil }
      defer { position += 1 }
      return batch[position]
    }

    /// Every value not handed out yet of the current batch, else the next batch (never empty);
    /// `nil` once the stream has ended. For consumers that take values in bulk.
    mutating func nextBatch() async throws -> ArraySlice<[UInt8]>? {
      guard try await refill(isolation: nil) else { return nil }
      defer { position = batch.count }
      return batch[position...]
    }

    /// Like ``nextBatch()``, but also returns the empty batches a diversion puts in the stream
    /// as markers (``NotificationStream/divert(to:)``).
    mutating func nextBatchOrMarker() async throws -> ArraySlice<[UInt8]>? {
      if position == batch.count {
        guard let next = try await batches.next(isolation: nil) else { return nil }
        buffer.taken(next.count)
        batch = next
        position = 0
      }
      defer { position = batch.count }
      return batch[position...]
    }

    /// Waits, if every value received so far was handed out, for the next non-empty batch;
    /// false once the stream has ended.
    private mutating func refill(isolation actor: isolated (any Actor)?) async throws -> Bool {
      while position == batch.count {
        guard let next = try await batches.next(isolation: actor) else { return false }
        buffer.taken(next.count)
        batch = next
        position = 0
      }
      return true
    }
  }
}

extension NotificationStream {
  /// Hands every burst the socket's reader reads from now on to `sink`, on the reader's own
  /// thread, instead of putting it in the stream: a consumer that can take values without
  /// waiting (a transfer's reassembly) then pays no hand-over between threads per burst, which
  /// on a slow link (one value per burst) costs more than the value's own work, and no array
  /// per value, which in a fast one costs more than the rest of the read. The switch happens
  /// between two bursts, and an empty batch in the stream marks it: batches before the marker
  /// are still in the stream (read them with the iterator's `nextBatchOrMarker()`), and `sink`
  /// reads every later value, in order. When `sink` returns true (it is done, or has
  /// something to say), another empty batch goes into the stream to wake its consumer. The
  /// stream's end still comes through the stream, after every value. Returns false (and
  /// changes nothing) for a stream with no socket (StartNotify).
  func divert(to sink: @escaping NotificationSocket.BurstSink) -> Bool {
    guard let reader, let route else { return false }
    reader.divert(to: sink, signal: { route.mark() })
    return true
  }

  typealias Batches = AsyncThrowingStream<[[UInt8]], any Error>

  /// A new stream of batches. Its own buffer has no limit: what bounds it is
  /// ``NotificationBuffer``, which each producer asks before it yields (``BatchRoute`` and the
  /// StartNotify path), counting values rather than batches (a batch holds 1 to
  /// `NotificationSocket.batchLimit` values).
  static func makeBatches() -> (Batches, Batches.Continuation) {
    Batches.makeStream(
      of: [[UInt8]].self, throwing: (any Error).self, bufferingPolicy: .unbounded)
  }

  /// The stream of an AcquireNotify socket `fd` (whose ownership passes to its reader, a
  /// `NotificationSocket`): every burst the reader reads is one batch. `watch` runs beside
  /// it until the stream stops, and ends it on a link loss with the reader's
  /// `finish(after:)`, which still delivers the values already in the socket first. An end
  /// with a `BluetoothError` (the socket closed, or the link-loss error) goes through
  /// `explain` before the stream throws it.
  static func reading(
    socket fd: Int32, mtu: Int, attQueue: KernelATTQueueWatch = KernelATTQueueWatch(),
    bufferLimit: Int = NotificationStream.bufferLimit,
    explain: @escaping @Sendable (BluetoothError) async -> BluetoothError,
    watch: @escaping @Sendable (NotificationSocket) async -> Void
  ) -> NotificationStream {
    let (batches, continuation) = makeBatches()
    let buffer = NotificationBuffer(limit: bufferLimit)
    let route = BatchRoute(continuation, buffer: buffer)
    let reader = NotificationSocket(
      fd: fd, mtu: mtu, attQueue: attQueue,
      onValues: { route.deliver($0) },
      onEnd: { error in
        guard let error = error as? BluetoothError else {
          if let error { continuation.finish(throwing: error) } else { continuation.finish() }
          return
        }
        // Every value was yielded before this (on the reader's queue), so it comes first.
        Task { continuation.finish(throwing: await explain(error)) }
      })
    let watching = Task { await watch(reader) }
    let subscription = NotificationSubscription {
      watching.cancel()
      reader.cancel()
    }
    continuation.onTermination = { _ in Task { await subscription.stop() } }
    return NotificationStream(
      batches: batches, buffer: buffer, subscription: subscription,
      method: .acquiredSocket(mtu: mtu), reader: reader, route: route)
  }
}

/// Puts a socket reader's batches into the stream (until it is diverted:
/// ``NotificationStream/divert(to:)``), as many as fit the stream's bound.
final class BatchRoute: Sendable {
  private let continuation: NotificationStream.Batches.Continuation
  private let buffer: NotificationBuffer

  init(_ continuation: NotificationStream.Batches.Continuation, buffer: NotificationBuffer) {
    self.continuation = continuation
    self.buffer = buffer
  }

  /// Puts an empty batch in the stream: a diversion's marker, or its sink's wake-up.
  func mark() {
    continuation.yield([])
  }

  func deliver(_ batch: [[UInt8]]) {
    // Only what fits the stream's bound goes in; the rest is dropped and counted. The reader
    // goes on reading the socket either way: stopping would make bluetoothd drop values
    // uncounted (it cannot write to a full socket).
    let room = buffer.admit(batch.count)
    if room == batch.count {
      continuation.yield(batch)
    } else if room > 0 {
      continuation.yield(Array(batch.prefix(room)))
    }
  }
}

/// The unread values of one ``NotificationStream`` against its bound, and the values dropped
/// because they came while it was full. Producers ask ``admit(_:)`` before they yield; the
/// iterator reports each batch it takes out (``taken(_:)``).
final class NotificationBuffer: Sendable {
  /// The most unread values (``NotificationStream/bufferLimit``, or a test's smaller one).
  let limit: Int
  private let counts = Mutex<(unread: Int, dropped: Int)>((0, 0))

  init(limit: Int) {
    self.limit = limit
  }

  /// Of `count` new values, how many fit (they are counted unread); the rest are counted
  /// dropped.
  func admit(_ count: Int) -> Int {
    counts.withLock { counts in
      let room = min(count, max(0, limit - counts.unread))
      counts.unread += room
      counts.dropped += count - room
      return room
    }
  }

  /// The consumer took `count` values out of the stream.
  func taken(_ count: Int) {
    counts.withLock { $0.unread = max(0, $0.unread - count) }
  }

  /// The values waiting unread.
  var unread: Int { counts.withLock { $0.unread } }

  /// The values dropped so far.
  var dropped: Int { counts.withLock { $0.dropped } }
}

/// The unsubscribe action of one stream, run at most once.
final class NotificationSubscription: Sendable {
  private let action: Mutex<(@Sendable () async -> Void)?>

  init(_ action: @escaping @Sendable () async -> Void) {
    self.action = Mutex(action)
  }

  func stop() async {
    let action = self.action.withLock { action in
      defer { action = nil }
      return action
    }
    await action?()
  }
}
