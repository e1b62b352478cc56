// State that tests can wait on: every change re-checks the conditions awaited, so a test awaits
// an event instead of sleeping for it.
import Synchronization

/// Why a simulation could not do what a test asked, or a wait that ran out of time.
public struct SimulationError: Error, Sendable, CustomStringConvertible {
  public var description: String
  init(_ description: String) { self.description = description }
}

/// A value behind a lock, with waiters resumed once a condition on it holds.
final class Observed<State: Sendable>: Sendable {
  private struct Waiter {
    let check: @Sendable (State) -> Bool
    let continuation: CheckedContinuation<Void, any Error>
  }
  private struct Box: ~Copyable {
    var state: State
    var waiters: [Int: Waiter] = [:]
    var next = 0
  }
  private let box: Mutex<Box>

  init(_ state: State) { box = Mutex(Box(state: state)) }

  /// Reads the state.
  func read<R>(_ body: (State) -> R) -> R { box.withLock { body($0.state) } }

  /// Changes the state and resumes the waiters whose condition now holds (after unlocking).
  @discardableResult
  func update<R>(_ body: (inout State) -> R) -> R {
    let (result, ready) = box.withLock { box -> (R, [Waiter]) in
      let result = body(&box.state)
      var ready: [Waiter] = []
      for (id, waiter) in box.waiters where waiter.check(box.state) {
        ready.append(waiter)
        box.waiters[id] = nil
      }
      return (result, ready)
    }
    for waiter in ready { waiter.continuation.resume() }
    return result
  }

  /// Returns once `check` holds; throws ``SimulationError`` when `timeout` passes first.
  func wait(
    _ what: String, timeout: Duration, until check: @escaping @Sendable (State) -> Bool
  ) async throws {
    let id = box.withLock { box -> Int? in
      if check(box.state) { return nil }
      box.next += 1
      return box.next
    }
    guard let id else { return }
    try await withCheckedThrowingContinuation {
      (continuation: CheckedContinuation<Void, any Error>) in
      let now = box.withLock { box -> Bool in
        if check(box.state) { return true }
        box.waiters[id] = Waiter(check: check, continuation: continuation)
        return false
      }
      if now {
        continuation.resume()
        return
      }
      Task { [weak self] in
        try? await Task.sleep(for: timeout)
        guard let waiter = self?.box.withLock({ $0.waiters.removeValue(forKey: id) }) else {
          return
        }
        waiter.continuation.resume(
          throwing: SimulationError("timed out after \(timeout) waiting until \(what)"))
      }
    }
  }
}
