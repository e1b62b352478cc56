// The Reactor over Unix socket pairs: a wait ends when its descriptor becomes ready, at its
// deadline, when its owner releases the descriptor, or when its task is cancelled, and in each
// case leaves nothing armed on the descriptor.
import Testing

@testable import DBus

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct ReactorTests {
  /// A non-blocking SOCK_SEQPACKET pair; the caller closes both.
  static func pair() throws -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    let result = fds.withUnsafeMutableBufferPointer {
      socketpair(
        AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, $0.baseAddress)
    }
    try #require(result == 0)
    for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    return (fds[0], fds[1])
  }

  @Test func aReadableWaitEndsWhenThePeerWrites() async throws {
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
    let waiting = Task { try await Reactor.shared.wait(fd, for: .readable) }
    try await Task.sleep(for: .milliseconds(200))
    #expect(Reactor.shared.pendingWaits(on: fd) == 1)
    var byte: UInt8 = 42
    #expect(write(peer, &byte, 1) == 1)
    #expect(try await waiting.value == .ready)
    #expect(Reactor.shared.pendingWaits(on: fd) == 0)
  }

  @Test func aWaitOnAReadyDescriptorEndsAtOnce() async throws {
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
    // An empty send buffer: writable already when armed (level-triggered, no lost wake-up).
    #expect(try await Reactor.shared.wait(fd, for: .writable) == .ready)
  }

  @Test func aWritableWaitEndsWhenThePeerMakesRoom() async throws {
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
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

  @Test func aWaitEndsAtItsDeadline() async throws {
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
    let start = ContinuousClock.now
    let wake = try await Reactor.shared.wait(
      fd, for: .readable, until: start + .milliseconds(300))
    let took = ContinuousClock.now - start
    #expect(wake == .timedOut)
    #expect(took >= .milliseconds(300))
    #expect(took < .seconds(3))
    #expect(Reactor.shared.pendingWaits(on: fd) == 0)
  }

  @Test func aCancelledWaitThrowsCancellationErrorAndIsDisarmed() async throws {
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
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

  @Test func releasingTheDescriptorEndsItsWaits() async throws {
    let (fd, peer) = try Self.pair()
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
    let (fd, peer) = try Self.pair()
    defer {
      Reactor.shared.release(fd)
      close(fd)
      close(peer)
    }
    // Writable all along; the readable wait must not end on that.
    let wake = try await Reactor.shared.wait(
      fd, for: .readable, until: .now + .milliseconds(300))
    #expect(wake == .timedOut)
  }
}
