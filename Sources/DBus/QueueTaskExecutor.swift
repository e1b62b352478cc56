// A TaskExecutor over the connection's serial queue: exported-method handler Tasks start where
// the call was decoded, and callers that prefer the connection's executor resume where their
// reply was read, without a thread hop.
import Dispatch
import Synchronization

/// Runs task jobs on a DispatchQueue.
///
/// Exported-method handler Tasks prefer one whose every job is a block of its own on the queue;
/// anything they await elsewhere moves them off it, so a handler only holds the queue while it
/// runs synchronous code.
///
/// One made with `runsInTurns` (the connection's public ``DBusConnection/executor``) also runs
/// the jobs enqueued during a *turn* of the queue (``turn(_:)``: the reactor's thread reading
/// the connection's socket inside the queue) at the end of that turn, on the same thread: a
/// caller whose reply was just read resumes there at once, where a block of its own would wake
/// a Dispatch worker thread for it (one context switch per call; `scripts/bench-dbus`).
final class QueueTaskExecutor: TaskExecutor {
  let queue: DispatchQueue
  private let runsInTurns: Bool
  private let turnState = Mutex(TurnState())

  private struct TurnState {
    /// Whether a turn is running (on the queue): work enqueued meanwhile waits in `pending`.
    var open = false
    var pending: [Work] = []
  }

  /// What a turn runs at its end.
  private enum Work {
    case job(UnownedJob)
    /// The connection's own end-of-turn work (``atEndOfTurn(_:)``).
    case action(@Sendable () -> Void)
  }

  init(queue: DispatchQueue, runsInTurns: Bool = false) {
    self.queue = queue
    self.runsInTurns = runsInTurns
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    // Any thread may enqueue: a job that finds a turn running waits for the turn's end, which
    // it would have waited for anyway (the queue is serial).
    if runsInTurns, joinTurn(.job(job)) { return }
    queue.async { self.turn { job.runSynchronously(on: self.asUnownedTaskExecutor()) } }
  }

  /// Runs `body` (on the queue) as a turn: the jobs enqueued while it runs, and those they
  /// enqueue, run after it on this thread before the turn ends. A turn inside a turn is the
  /// outer one's.
  func turn<Result>(_ body: () -> Result) -> Result {
    guard runsInTurns else { return body() }
    let nested = turnState.withLock { state in
      if state.open { return true }
      state.open = true
      return false
    }
    if nested { return body() }
    let result = body()
    var work: [Work] = []
    while true {
      turnState.withLock { state in
        if state.pending.isEmpty {
          state.open = false
        } else {
          swap(&work, &state.pending)
        }
      }
      if work.isEmpty { break }
      for next in work {
        switch next {
        case .job(let job): job.runSynchronously(on: asUnownedTaskExecutor())
        case .action(let action): action()
        }
      }
      work.removeAll(keepingCapacity: true)
    }
    return result
  }

  /// Runs `action` at the end of the turn running now (on the queue), after the jobs enqueued
  /// before it; `false` when no turn is running (the caller then schedules it itself).
  func atEndOfTurn(_ action: @escaping @Sendable () -> Void) -> Bool {
    joinTurn(.action(action))
  }

  /// Adds `work` to the turn running now; `false` when none is.
  private func joinTurn(_ work: Work) -> Bool {
    turnState.withLock { state in
      guard state.open else { return false }
      state.pending.append(work)
      return true
    }
  }
}
