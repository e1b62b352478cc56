// L2CAPReadCredits: how many more SDUs a channel's reader may read before its consumer takes
// some: the bound of L2CAPChannel.incoming, awaited by the reader instead of blocking a thread.
import Synchronization

/// A counter of free places in a channel's buffer of received SDUs, for one reader task: the
/// reader takes a place before each read (waiting while there is none), the consumer gives
/// one back for each SDU it takes out, and closing ends the reader's wait.
final class L2CAPReadCredits: Sendable {
  private struct State {
    var free: Int
    var closed = false
    var waiting: CheckedContinuation<Bool, Never>?
  }
  private let state: Mutex<State>

  init(_ places: Int) {
    state = Mutex(State(free: places))
  }

  /// Takes a place, waiting until there is one: true, or false once closed.
  func take() async -> Bool {
    let now: Bool? = state.withLock { state in
      if state.closed { return false }
      guard state.free > 0 else { return nil }
      state.free -= 1
      return true
    }
    if let now { return now }
    return await withCheckedContinuation { continuation in
      let now: Bool? = state.withLock { state in
        if state.closed { return false }
        guard state.free > 0 else {
          state.waiting = continuation
          return nil
        }
        state.free -= 1
        return true
      }
      if let now { continuation.resume(returning: now) }
    }
  }

  /// Gives a place back (one SDU left the buffer).
  func give() {
    let reader: CheckedContinuation<Bool, Never>? = state.withLock { state in
      if let waiting = state.waiting {
        state.waiting = nil
        return waiting
      }
      state.free += 1
      return nil
    }
    reader?.resume(returning: true)
  }

  /// Ends the reader's wait, now and for good.
  func close() {
    let reader: CheckedContinuation<Bool, Never>? = state.withLock { state in
      state.closed = true
      defer { state.waiting = nil }
      return state.waiting
    }
    reader?.resume(returning: false)
  }
}
