// Cleanup that outlives cancellation: undoing work after Ctrl-C, bounded in time.
import Synchronization

/// How long ``runCleanup(within:_:)`` waits unless told otherwise: long enough for a handful
/// of calls to a busy bluetoothd, short enough that Ctrl-C still ends a command promptly.
public let defaultCleanupLimit: Duration = .seconds(5)

/// Runs `work` to its end even when the calling task is cancelled, waiting at most `limit`.
///
/// A call made from a cancelled task is cancelled before it is sent (see
/// ``DBusConnection/call(_:timeout:what:)``), so undoing something on the way out of a
/// cancelled task (unregistering an agent, disconnecting a device, withdrawing a service)
/// silently does nothing there. `work` runs instead in a task of its own, which does not
/// inherit the caller's cancellation. When `limit` passes first, that task is cancelled (its
/// pending calls end with ``DBusError/Code/cancelled``) and this returns without waiting for
/// it.
///
/// - Returns: true when `work` finished within `limit`.
@discardableResult
public func runCleanup(
  within limit: Duration = defaultCleanupLimit, _ work: @escaping @Sendable () async -> Void
) async -> Bool {
  let race = CleanupRace()
  let worker = Task {
    await work()
    race.end(finished: true)
  }
  let timer = Task {
    try? await Task.sleep(for: limit)
    race.end(finished: false)
  }
  let finished = await race.outcome()
  if finished { timer.cancel() } else { worker.cancel() }
  return finished
}

/// The first of "the work finished" and "the time ran out", for one waiter that may be
/// cancelled (it must not notice: it waits with a plain continuation).
private final class CleanupRace: Sendable {
  private struct State {
    var finished: Bool?
    var waiter: CheckedContinuation<Bool, Never>?
  }
  private let state = Mutex(State())

  /// Records the outcome unless one was recorded already, and wakes the waiter.
  func end(finished: Bool) {
    let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
      guard state.finished == nil else { return nil }
      state.finished = finished
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: finished)
  }

  /// Waits for the outcome.
  func outcome() async -> Bool {
    await withCheckedContinuation { continuation in
      let ready = state.withLock { state -> Bool? in
        if let finished = state.finished { return finished }
        state.waiter = continuation
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }
}
