// TransferDeadlines: how long a transfer may take in all and without progress, and the watch that
// ends one when either passes. Used by both framings' receivers and senders (GATT and L2CAP).
import Synchronization

/// When a transfer gives up: an overall ``deadline`` from its start (the subscription, or the
/// channel's opening) and an ``idleTimeout`` that only progress resets.
///
/// Progress is message bytes taken in (a receiver), handed on (a GATT sender) or confirmed by
/// the receiver (an L2CAP sender). Traffic that moves nothing on (an empty value, a frame
/// received twice, a window confirmation that confirms nothing new) is not progress: a peer
/// that trickles such traffic, or a byte now and then, cannot hold a transfer forever.
public struct TransferDeadlines: Sendable, Hashable {
  /// The longest a transfer may take in all.
  public var deadline: Duration
  /// The longest a transfer may go without progress.
  public var idleTimeout: Duration

  /// 600 s: blekit's largest message (16 MiB) needs about 28 KB/s to make it, several times
  /// slower than the transfers measured in docs/benchmarks.md; a longer one needs a longer
  /// deadline on purpose.
  public static let defaultDeadline: Duration = .seconds(600)
  /// 15 s: half of ATT's 30 s transaction timeout (Core Specification Vol 3 Part F 3.3.3), a
  /// silence in which a working link has long shown progress.
  public static let defaultIdleTimeout: Duration = .seconds(15)

  public init(
    deadline: Duration = TransferDeadlines.defaultDeadline,
    idleTimeout: Duration = TransferDeadlines.defaultIdleTimeout
  ) {
    self.deadline = deadline
    self.idleTimeout = idleTimeout
  }

  /// Which limit ended a transfer.
  public enum Expiry: Sendable, Hashable, CustomStringConvertible {
    /// No progress for this long.
    case idle(Duration)
    /// Not finished within the deadline.
    case deadline(Duration)

    public var description: String {
      switch self {
      case .idle(let limit): "no progress for \(TransferDeadlines.seconds(limit)) s"
      case .deadline(let limit): "not finished within \(TransferDeadlines.seconds(limit)) s"
      }
    }
  }

  /// Which limit has passed at `now` for a transfer that began at `start` and last progressed
  /// at `lastProgress`, if any. The deadline wins when both have.
  public func expiry(
    start: ContinuousClock.Instant, lastProgress: ContinuousClock.Instant,
    now: ContinuousClock.Instant
  ) -> Expiry? {
    if now >= start + deadline { return .deadline(deadline) }
    if now >= lastProgress + idleTimeout { return .idle(idleTimeout) }
    return nil
  }

  /// Seconds, without a fraction when whole: `15`, `0.5`.
  static func seconds(_ duration: Duration) -> String {
    let (whole, attoseconds) = duration.components
    guard attoseconds != 0 else { return "\(whole)" }
    return String(Double(whole) + Double(attoseconds) / 1e18)
  }
}

/// Watches one transfer against its ``TransferDeadlines``: ``progressed(to:)`` reports how far it
/// got, and ``start(onExpiry:)`` calls its closure once (from a task of its own) when a limit
/// passes. The closure ends the transfer's waits (closes its channel, cancels its task);
/// ``expired`` then says why, so that the error the ended wait throws can be replaced.
final class ProgressWatch: Sendable {
  private struct State {
    var lastProgress: ContinuousClock.Instant
    var done = 0
    var expired: TransferDeadlines.Expiry?
  }
  let deadlines: TransferDeadlines
  let start: ContinuousClock.Instant
  private let state: Mutex<State>
  private let watcher = Mutex<Task<Void, Never>?>(nil)

  init(_ deadlines: TransferDeadlines, start: ContinuousClock.Instant = .now) {
    self.deadlines = deadlines
    self.start = start
    state = Mutex(State(lastProgress: start))
  }

  deinit { watcher.withLock { $0?.cancel() } }

  /// The transfer has moved `done` units (bytes) on in all: the idle timer restarts only when
  /// that is more than before.
  func progressed(to done: Int, at now: ContinuousClock.Instant = .now) {
    state.withLock { state in
      guard done > state.done else { return }
      state.done = done
      state.lastProgress = now
    }
  }

  /// The limit that ended the transfer, once one has.
  var expired: TransferDeadlines.Expiry? { state.withLock { $0.expired } }

  /// Starts watching; `onExpiry` runs at most once. ``stop()`` (or the watch's end) stops it.
  func start(onExpiry: @escaping @Sendable (TransferDeadlines.Expiry) -> Void) {
    let task = Task { [self] in
      // Sleeps until a limit would pass if nothing came meanwhile (not woken twice a second
      // to find that nothing did).
      while !Task.isCancelled {
        let (expiry, wake) = state.withLock { state in
          let now = ContinuousClock.now
          let expiry = deadlines.expiry(start: start, lastProgress: state.lastProgress, now: now)
          if let expiry { state.expired = expiry }
          return (
            expiry, min(start + deadlines.deadline, state.lastProgress + deadlines.idleTimeout)
          )
        }
        if let expiry {
          onExpiry(expiry)
          return
        }
        try? await Task.sleep(until: wake, clock: .continuous)
      }
    }
    watcher.withLock { $0 = task }
  }

  /// Stops watching (the transfer ended by itself).
  func stop() { watcher.withLock { $0?.cancel() } }
}
