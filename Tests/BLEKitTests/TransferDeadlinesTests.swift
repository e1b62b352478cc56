// TransferDeadlines' rule: the deadline counts from the start, the idle timeout from the last
// progress, and only more done than before is progress.
import Testing

@testable import BLEKit

struct TransferDeadlinesTests {
  let deadlines = TransferDeadlines(deadline: .seconds(60), idleTimeout: .seconds(10))
  let start = ContinuousClock.now

  @Test func theIdleTimeoutCountsFromTheLastProgress() {
    #expect(deadlines.expiry(start: start, lastProgress: start, now: start + .seconds(9)) == nil)
    #expect(
      deadlines.expiry(start: start, lastProgress: start, now: start + .seconds(10))
        == .idle(.seconds(10)))
    #expect(
      deadlines.expiry(
        start: start, lastProgress: start + .seconds(30), now: start + .seconds(39)) == nil)
  }

  @Test func theDeadlinePassesWhateverTheProgress() {
    #expect(
      deadlines.expiry(
        start: start, lastProgress: start + .seconds(59), now: start + .seconds(60))
        == .deadline(.seconds(60)))
    // Both passed: the deadline is what is reported.
    #expect(
      deadlines.expiry(start: start, lastProgress: start, now: start + .seconds(61))
        == .deadline(.seconds(60)))
  }

  @Test func onlyMoreThanBeforeIsProgress() async throws {
    let watch = ProgressWatch(
      TransferDeadlines(deadline: .seconds(60), idleTimeout: .milliseconds(300)))
    let fired = AsyncStream<TransferDeadlines.Expiry>.makeStream()
    watch.start { expiry in
      fired.continuation.yield(expiry)
      fired.continuation.finish()
    }
    watch.progressed(to: 5)
    // The same count again and again (an empty value, a repeated frame) is traffic, not
    // progress: the idle timeout passes all the same.
    let repeats = Task {
      while !Task.isCancelled {
        watch.progressed(to: 5)
        try? await Task.sleep(for: .milliseconds(20))
      }
    }
    defer { repeats.cancel() }
    let started = ContinuousClock.now
    var iterator = fired.stream.makeAsyncIterator()
    #expect(await iterator.next() == .idle(.milliseconds(300)))
    // Fired at all, while the repeats went on (a loaded test process delayed the 300 ms timer
    // by 7.6 s once: the bound says "not reset by traffic", not how punctual the pool is).
    #expect(ContinuousClock.now - started < .seconds(30))
    #expect(watch.expired == .idle(.milliseconds(300)))
  }

  @Test func expiriesSayWhatPassed() {
    #expect(TransferDeadlines.Expiry.idle(.seconds(15)).description == "no progress for 15 s")
    #expect(
      TransferDeadlines.Expiry.deadline(.milliseconds(2500)).description
        == "not finished within 2.5 s")
  }
}
