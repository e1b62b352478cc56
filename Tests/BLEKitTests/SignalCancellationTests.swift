import BLEKit
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

// runCancellingOnSignals: a real signal sent to this process cancels the work and no more.
// Serialized: signal handling belongs to the whole process.
final class SignalsDone: Sendable {
  let value = Mutex(false)
  let sender = Mutex<Task<Void, Never>?>(nil)

  /// Stops the signalling and waits until its task has sent its last signal: one sent after
  /// the test would cancel the next test's call.
  func finish() async {
    value.withLock { $0 = true }
    await sender.withLock { $0 }?.value
  }
}

@Suite(.serialized) struct SignalCancellationTests {
  /// Signals `number` to this process every 50 ms until `done`: a signal that comes before the
  /// helper's source is ready is ignored (the helper has switched its default action off).
  static func keepSignalling(_ number: Int32, until done: SignalsDone) -> Task<Void, Never> {
    let task = Task.detached {
      while !done.value.withLock({ $0 }) {
        kill(getpid(), number)
        try? await Task.sleep(for: .milliseconds(50))
      }
    }
    done.sender.withLock { $0 = task }
    return task
  }

  // First in this serialized suite: no signal of the tests below can reach it late.
  @Test func withoutASignalTheResultAndErrorsPassThrough() async throws {
    #expect(try await runCancellingOnSignals { 42 } == 42)
    struct Failure: Error, Equatable {}
    await #expect(throws: Failure()) {
      try await runCancellingOnSignals { () async throws -> Int in throw Failure() }
    }
  }

  // From the main actor, as top-level code of a program calls it: the signal is handled
  // off the main actor without tripping Swift 6's isolation check.
  @MainActor @Test(arguments: [SIGINT, SIGTERM])
  func aSignalCancelsTheWorkWhichStillFinishesItsWayOut(number: Int32) async throws {
    let started = Mutex(false)
    let wayOut = Mutex(false)
    let done = SignalsDone()
    await #expect(throws: CancellationError.self) {
      try await runCancellingOnSignals {
        started.withLock { $0 = true }
        _ = Self.keepSignalling(number, until: done)
        // Waits for cancellation (60 s is far longer than the test may take).
        try? await Task.sleep(for: .seconds(60))
        wayOut.withLock { $0 = Task.isCancelled }
        return 1
      }
    }
    await done.finish()
    #expect(started.withLock { $0 })
    #expect(wayOut.withLock { $0 }, "the work saw its task cancelled")
  }

  // Dispatch takes a signal over once per process: a later call must still hear it.
  @Test func callsInTurnEachHearTheSignal() async throws {
    for _ in 1...3 {
      let done = SignalsDone()
      await #expect(throws: CancellationError.self) {
        try await runCancellingOnSignals([SIGUSR1]) {
          _ = Self.keepSignalling(SIGUSR1, until: done)
          try await Task.sleep(for: .seconds(8))
        }
      }
      await done.finish()
    }
  }

  @Test func cancellingTheCallerCancelsTheWork() async throws {
    let sawCancel = Mutex(false)
    // SIGUSR2, which no other test sends: a SIGINT or SIGTERM of the tests above that Dispatch
    // still held when this one began cancelled it once in a full run.
    let caller = Task {
      try await runCancellingOnSignals([SIGUSR2]) {
        try? await Task.sleep(for: .seconds(60))
        sawCancel.withLock { $0 = Task.isCancelled }
      }
    }
    try await Task.sleep(for: .milliseconds(100))
    caller.cancel()
    try await caller.value
    #expect(sawCancel.withLock { $0 })
  }
}
