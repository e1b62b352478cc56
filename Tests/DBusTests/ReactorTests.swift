// The Reactor over Unix socket pairs: a wait ends when its descriptor becomes ready, at its
// deadline, when its owner releases the descriptor, or when its task is cancelled, and in each
// case leaves nothing armed on the descriptor.
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct ReactorTests {
  /// Runs `body` with a non-blocking pair (`seqpacketPair`), then releases the first end from
  /// the reactor and closes both.
  static func withPair(_ body: (_ fd: Int32, _ peer: Int32) async throws -> Void) async throws {
    let (fd, peer) = try seqpacketPair(nonBlocking: true)
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
    try await body(fd, peer)
  }

  @Test func aReadableWaitEndsWhenThePeerWrites() async throws {
    try await Self.withPair { fd, peer in
      let waiting = Task { try await Reactor.shared.wait(fd, for: .readable) }
      try await Task.sleep(for: .milliseconds(200))
      #expect(Reactor.shared.pendingWaits(on: fd) == 1)
      var byte: UInt8 = 42
      #expect(write(peer, &byte, 1) == 1)
      #expect(try await waiting.value == .ready)
      #expect(Reactor.shared.pendingWaits(on: fd) == 0)
    }
  }

  @Test func aWaitOnAReadyDescriptorEndsAtOnce() async throws {
    try await Self.withPair { fd, _ in
      // An empty send buffer: writable already when armed (level-triggered, no lost wake-up).
      let wake = try await Reactor.shared.wait(fd, for: .writable)
      #expect(wake == .ready)
    }
  }

  @Test func aWritableWaitEndsWhenThePeerMakesRoom() async throws {
    try await Self.withPair { fd, peer in
      let chunk = [UInt8](repeating: 1, count: 4096)
      while chunk.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) > 0 {}
      #expect(errno == EAGAIN)
      let waiting = Task { try await Reactor.shared.wait(fd, for: .writable) }
      try await Task.sleep(for: .milliseconds(200))
      #expect(Reactor.shared.pendingWaits(on: fd) == 1)
      var buffer = [UInt8](repeating: 0, count: 4096)
      while read(peer, &buffer, buffer.count) > 0 {}
      #expect(try await waiting.value == .ready)
    }
  }

  @Test func aWaitEndsAtItsDeadline() async throws {
    try await Self.withPair { fd, _ in
      let start = ContinuousClock.now
      let wake = try await Reactor.shared.wait(
        fd, for: .readable, until: start + .milliseconds(300))
      let took = ContinuousClock.now - start
      #expect(wake == .timedOut)
      #expect(took >= .milliseconds(300))
      #expect(took < .seconds(3))
      #expect(Reactor.shared.pendingWaits(on: fd) == 0)
    }
  }

  /// The reactor looks for due deadlines only while it counts some: every way a wait with a
  /// deadline ends counts it out, and one still armed times out beside waits without one.
  @Test func everyEndOfAWaitWithADeadlineCountsItOut() async throws {
    let reactor = Reactor()
    let far = ContinuousClock.now + .seconds(60)
    try await Self.withPair { fd, peer in
      // Ready.
      let readable = reactor.arm(fd, for: .readable, until: far)
      #expect(reactor.armedDeadlines == 1)
      var byte: UInt8 = 1
      #expect(write(peer, &byte, 1) == 1)
      #expect(try await readable.value() == .ready)
      #expect(read(fd, &byte, 1) == 1)
      #expect(reactor.armedDeadlines == 0)
      // Timed out.
      let soon = try await reactor.wait(
        fd, for: .readable, until: .now + .milliseconds(100))
      #expect(soon == .timedOut)
      #expect(reactor.armedDeadlines == 0)
      // Cancelled.
      let cancelled = Task { try await reactor.wait(fd, for: .readable, until: far) }
      while reactor.armedDeadlines == 0 { try await Task.sleep(for: .milliseconds(10)) }
      cancelled.cancel()
      await #expect(throws: CancellationError.self) { try await cancelled.value }
      #expect(reactor.armedDeadlines == 0)
      // A deadline beside a wait without one still ends at its time.
      let open = reactor.arm(fd, for: .readable)
      let timed = try await reactor.wait(fd, for: .readable, until: .now + .milliseconds(100))
      #expect(timed == .timedOut)
      #expect(reactor.pendingWaits(on: fd) == 1)
      // Released.
      _ = reactor.arm(fd, for: .readable, until: far)
      #expect(reactor.armedDeadlines == 1)
      reactor.release(fd)
      #expect(try await open.value() == .released)
      #expect(reactor.armedDeadlines == 0)
    }
  }

  @Test func aCancelledWaitThrowsCancellationErrorAndIsDisarmed() async throws {
    try await Self.withPair { fd, peer in
      let waiting = Task { try await Reactor.shared.wait(fd, for: .readable) }
      try await Task.sleep(for: .milliseconds(200))
      #expect(Reactor.shared.pendingWaits(on: fd) == 1)
      waiting.cancel()
      await #expect(throws: CancellationError.self) { try await waiting.value }
      #expect(Reactor.shared.pendingWaits(on: fd) == 0)
      // A later wait on the same descriptor still works.
      var byte: UInt8 = 1
      #expect(write(peer, &byte, 1) == 1)
      #expect(try await Reactor.shared.wait(fd, for: .readable) == .ready)
    }
  }

  @Test func releasingTheDescriptorEndsItsWaits() async throws {
    let (fd, peer) = try seqpacketPair(nonBlocking: true)
    defer {
      close(fd)
      close(peer)
    }
    let reading = Task { try await Reactor.shared.wait(fd, for: .readable) }
    let readingAgain = Task { try await Reactor.shared.wait(fd, for: .readable) }
    try await Task.sleep(for: .milliseconds(200))
    #expect(Reactor.shared.pendingWaits(on: fd) == 2)
    Reactor.shared.release(fd)
    #expect(try await reading.value == .released)
    #expect(try await readingAgain.value == .released)
    #expect(Reactor.shared.pendingWaits(on: fd) == 0)
  }

  @Test func aWaitForOneDirectionIgnoresTheOther() async throws {
    try await Self.withPair { fd, _ in
      // Writable all along; the readable wait must not end on that.
      let wake = try await Reactor.shared.wait(
        fd, for: .readable, until: .now + .milliseconds(300))
      #expect(wake == .timedOut)
    }
  }
}
