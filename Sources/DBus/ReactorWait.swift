// ReactorWait: one armed wait on a descriptor, ended once by the Reactor (ready, timed out,
// released) or by its task's cancellation, and awaited by one task.
import Synchronization

/// One wait armed with ``Reactor/arm(_:for:until:)``: armed synchronously (under the
/// caller's lock, right after its `EAGAIN`), awaited afterwards with ``value()``. It ends once;
/// an end that comes before ``value()`` is kept for it.
package final class ReactorWait: Sendable {
  /// How a wait ended.
  package enum Wake: Sendable, Equatable {
    /// The descriptor is ready for what was asked (or has an error or hang-up to report):
    /// retry the call.
    case ready
    /// The deadline passed first.
    case timedOut
    /// The descriptor's owner released it (it is being closed).
    case released
    /// The awaiting task was cancelled (``value()`` throws `CancellationError` instead).
    case cancelled
  }

  private enum Phase {
    case armed
    case awaited(CheckedContinuation<Wake, Never>)
    case ended(Wake)
  }

  let fd: Int32
  let interest: Reactor.Interest
  let deadline: ContinuousClock.Instant?
  private let reactor: Reactor
  private let phase = Mutex(Phase.armed)

  init(
    fd: Int32, interest: Reactor.Interest, deadline: ContinuousClock.Instant?, reactor: Reactor
  ) {
    self.fd = fd
    self.interest = interest
    self.deadline = deadline
    self.reactor = reactor
  }

  /// Waits for the end; a cancelled task (before or during the wait) disarms it and throws
  /// `CancellationError`.
  package func value() async throws -> Wake {
    let wake = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let ended: Wake? = phase.withLock { phase in
          if case .ended(let wake) = phase { return wake }
          phase = .awaited(continuation)
          return nil
        }
        if let ended { continuation.resume(returning: ended) }
      }
    } onCancel: {
      reactor.cancel(self)
    }
    if wake == .cancelled { throw CancellationError() }
    return wake
  }

  /// Ends the wait (the first end counts), resuming its task outside the lock.
  func complete(_ wake: Wake) {
    let continuation: CheckedContinuation<Wake, Never>? = phase.withLock { phase in
      switch phase {
      case .ended:
        return nil
      case .armed:
        phase = .ended(wake)
        return nil
      case .awaited(let continuation):
        phase = .ended(wake)
        return continuation
      }
    }
    continuation?.resume(returning: wake)
  }
}
