// The PeripheralManager's events as a bounded queue: writes beyond the bound are refused or
// dropped, and counted.
import Synchronization

/// The events of a ``PeripheralManager`` (``PeripheralManager/events``), in order.
///
/// At most ``PeripheralManager/eventLimit`` events wait unread. When that many do (the app
/// reads its events more slowly than centrals write: a consumer printing to a pipe nobody
/// reads, a terminal paused with Ctrl-S), a central's write no longer becomes an event:
/// - a write request (with response) to a characteristic without an `onWrite` handler, whose
///   only trace the event would be, is refused: the central gets an ATT error (bluetoothd's
///   answer to `org.bluez.Error.Failed`), so it knows the value did not land and can retry.
///   Counted in ``PeripheralManager/refusedWrites``.
/// - any other write (a write without response, which cannot be refused, or one an `onWrite`
///   handler already took, or a descriptor's, already stored) is accepted, and its event
///   dropped. Counted in ``PeripheralManager/droppedWriteEvents``.
///
/// The other events (subscriptions, readiness, advertising) are always queued: they change
/// what the app must do, and each comes from a subscription or a call of the app's.
public struct PeripheralManagerEvents: AsyncSequence, Sendable {
  public typealias Element = PeripheralManagerEvent
  public typealias Failure = Never
  let stream: AsyncStream<PeripheralManagerEvent>
  let queue: PeripheralEventQueue

  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(base: stream.makeAsyncIterator(), queue: queue)
  }

  /// Hands out the events in order; each one taken makes room for another.
  public struct AsyncIterator: AsyncIteratorProtocol {
    public typealias Element = PeripheralManagerEvent
    public typealias Failure = Never
    private var base: AsyncStream<PeripheralManagerEvent>.Iterator
    private let queue: PeripheralEventQueue

    init(base: AsyncStream<PeripheralManagerEvent>.Iterator, queue: PeripheralEventQueue) {
      self.base = base
      self.queue = queue
    }

    /// The next event, or `nil` once the manager is closed.
    public mutating func next() async -> PeripheralManagerEvent? {
      await next(isolation: nil)
    }

    /// The next event, or `nil` once the manager is closed; waits (if it must) on `actor`.
    public mutating func next(isolation actor: isolated (any Actor)?) async
      -> PeripheralManagerEvent?
    {
      let event = await base.next(isolation: actor)
      if event != nil { queue.taken() }
      return event
    }
  }
}

/// The producer's side of ``PeripheralManagerEvents``: the stream's continuation, the count of
/// unread events against the bound, and the writes refused or dropped at it.
final class PeripheralEventQueue: Sendable {
  /// The most unread events (``PeripheralManager/eventLimit``, or a test's smaller one).
  let limit: Int
  private let continuation: AsyncStream<PeripheralManagerEvent>.Continuation
  private struct Counts {
    var unread = 0
    var refused = 0
    var dropped = 0
  }
  private let counts = Mutex(Counts())

  /// A queue of at most `limit` unread events, and its consumer's side.
  static func make(limit: Int) -> (PeripheralManagerEvents, PeripheralEventQueue) {
    // The stream's own buffer has no limit: the queue bounds it, counting before each yield.
    let (stream, continuation) = AsyncStream.makeStream(
      of: PeripheralManagerEvent.self, bufferingPolicy: .unbounded)
    let queue = PeripheralEventQueue(limit: limit, continuation: continuation)
    return (PeripheralManagerEvents(stream: stream, queue: queue), queue)
  }

  private init(limit: Int, continuation: AsyncStream<PeripheralManagerEvent>.Continuation) {
    self.limit = limit
    self.continuation = continuation
  }

  /// Queues an event that is not a write, whatever the count.
  func yield(_ event: PeripheralManagerEvent) {
    counts.withLock { $0.unread += 1 }
    continuation.yield(event)
  }

  /// Whether a write request whose event would be its only trace must be refused (the queue is
  /// full); a refusal is counted.
  func refusesWrite() -> Bool {
    counts.withLock { counts in
      guard counts.unread >= limit else { return false }
      counts.refused += 1
      return true
    }
  }

  /// Queues an accepted write's event, or drops and counts it when the queue is full.
  func yieldWrite(_ write: ATTWriteRequest) {
    let fits = counts.withLock { counts in
      guard counts.unread < limit else {
        counts.dropped += 1
        return false
      }
      counts.unread += 1
      return true
    }
    if fits { continuation.yield(.write(write)) }
  }

  /// The consumer took an event.
  func taken() {
    counts.withLock { $0.unread = max(0, $0.unread - 1) }
  }

  func finish() {
    continuation.finish()
  }

  var unread: Int { counts.withLock { $0.unread } }
  var refused: Int { counts.withLock { $0.refused } }
  var dropped: Int { counts.withLock { $0.dropped } }
}
