// The Reactor's watches over Unix socket pairs: a handler runs on the reactor's thread while its
// descriptor is ready (again while input is left), a watched descriptor takes no wait and no
// second watch, a disabled one leaves input waiting, a shutdown wakes it, and a handler that ends
// its watch is never called again, not even for a new descriptor that reuses the number.
import Synchronization
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct ReactorWatchTests {
  final class Calls: Sendable {
    let count = Mutex(0)
    let read = Mutex<[UInt8]>([])
    let hangUps = Mutex(0)
  }

  /// Waits (at most 10 s) until `done` holds.
  static func eventually(_ done: () -> Bool) async throws {
    let limit = ContinuousClock.now + .seconds(10)
    while !done(), ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
  }

  static func send(_ fd: Int32, _ byte: UInt8) -> Int {
    var byte = byte
    return Glibc.send(fd, &byte, 1, 0)
  }

  @Test func aHandlerReadsOneValuePerCallAndIsCalledUntilNoneIsLeft() async throws {
    try await ReactorTests.withPair { fd, peer in
      let calls = Calls()
      let watched = Reactor.shared.watch(fd) { event in
        calls.count.withLock { $0 += 1 }
        var byte: UInt8 = 0
        if event.readable, recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 1 {
          calls.read.withLock { $0.append(byte) }
        }
      }
      #expect(watched)
      for byte: UInt8 in [1, 2, 3] { #expect(Self.send(peer, byte) == 1) }
      try await Self.eventually { calls.read.withLock { $0.count } == 3 }
      // Level-triggered: each call read one of the three, and the rest called it again.
      #expect(calls.read.withLock { $0 } == [1, 2, 3])
      try await Task.sleep(for: .milliseconds(100))
      #expect(calls.count.withLock { $0 } == 3)
    }
  }

  @Test func aWatchedDescriptorTakesNoWaitAndNoSecondWatch() async throws {
    try await ReactorTests.withPair { fd, _ in
      #expect(Reactor.shared.watch(fd) { _ in })
      #expect(!Reactor.shared.watch(fd) { _ in })
      let wake = try await Reactor.shared.wait(fd, for: .readable)
      #expect(wake == .released)
    }
  }

  @Test func aShutdownWakesTheHandler() async throws {
    try await ReactorTests.withPair { fd, _ in
      let calls = Calls()
      #expect(
        Reactor.shared.watch(fd) { event in
          var byte: UInt8 = 0
          if event.readable, recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0 {
            calls.hangUps.withLock { $0 += 1 }
            Reactor.shared.release(fd)
          }
        })
      try await Task.sleep(for: .milliseconds(100))
      #expect(calls.hangUps.withLock { $0 } == 0)
      #expect(shutdown(fd, Int32(SHUT_RDWR)) == 0)
      try await Self.eventually { calls.hangUps.withLock { $0 } == 1 }
      #expect(calls.hangUps.withLock { $0 } == 1)
    }
  }

  @Test func aHandlerThatEndsItsWatchIsNotCalledForTheNumbersNextOwner() async throws {
    let (fd, peer) = try seqpacketPair(nonBlocking: true)
    let calls = Calls()
    #expect(
      Reactor.shared.watch(fd) { _ in
        calls.count.withLock { $0 += 1 }
        Reactor.shared.release(fd)
        close(fd)
      })
    #expect(Self.send(peer, 7) == 1)
    try await Self.eventually { calls.count.withLock { $0 } == 1 }
    close(peer)
    // A new pair takes the lowest free numbers, the old ones among them; input on it reaches
    // its own watch only.
    let (next, nextPeer) = try seqpacketPair(nonBlocking: true)
    defer {
      Reactor.shared.release(next)
      close(next)
      close(nextPeer)
    }
    let nextCalls = Calls()
    #expect(
      Reactor.shared.watch(next) { _ in
        nextCalls.count.withLock { $0 += 1 }
        var byte: UInt8 = 0
        _ = recv(next, &byte, 1, Int32(MSG_DONTWAIT))
      })
    #expect(Self.send(nextPeer, 8) == 1)
    try await Self.eventually { nextCalls.count.withLock { $0 } == 1 }
    try await Task.sleep(for: .milliseconds(100))
    #expect(nextCalls.count.withLock { $0 } == 1)
    #expect(calls.count.withLock { $0 } == 1)
  }

  @Test func aDisabledWatchLeavesInputWaitingUntilEnabled() async throws {
    try await ReactorTests.withPair { fd, peer in
      let calls = Calls()
      #expect(
        Reactor.shared.watch(fd, enabled: false) { event in
          var byte: UInt8 = 0
          if event.readable, recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 1 {
            calls.read.withLock { $0.append(byte) }
          }
        })
      // Disabled at first: input waits.
      #expect(Self.send(peer, 1) == 1)
      try await Task.sleep(for: .milliseconds(100))
      #expect(calls.read.withLock { $0 }.isEmpty)
      Reactor.shared.enableWatch(fd, true)
      try await Self.eventually { calls.read.withLock { $0 } == [1] }
      #expect(calls.read.withLock { $0 } == [1])
      Reactor.shared.enableWatch(fd, false)
      #expect(Self.send(peer, 2) == 1)
      try await Task.sleep(for: .milliseconds(100))
      #expect(calls.read.withLock { $0 } == [1])
      Reactor.shared.enableWatch(fd, true)
      try await Self.eventually { calls.read.withLock { $0 } == [1, 2] }
      #expect(calls.read.withLock { $0 } == [1, 2])
    }
  }

  @Test func aWritableWatchRunsWhileThereIsRoom() async throws {
    try await ReactorTests.withPair { fd, _ in
      let calls = Calls()
      #expect(
        Reactor.shared.watch(fd, for: .writable) { event in
          if event.writable {
            calls.count.withLock { $0 += 1 }
            Reactor.shared.enableWatch(fd, false)
          }
        })
      try await Self.eventually { calls.count.withLock { $0 } == 1 }
      try await Task.sleep(for: .milliseconds(100))
      #expect(calls.count.withLock { $0 } == 1)
    }
  }
}
