// NotificationSocket over a Unix SOCK_SEQPACKET pair standing in for bluetoothd's AcquireNotify
// socket: its reader hands over every value in order (an empty one too) and then the end;
// cancelling it closes the socket.
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct NotificationSocketTests {
  final class Received: Sendable {
    let values = Mutex<[[UInt8]]>([])
    let ended = Mutex<(any Error)??>(nil)
  }

  static func reader(_ fd: Int32, into received: Received) -> NotificationSocket {
    NotificationSocket(
      fd: fd, mtu: 512,
      onValues: { batch in received.values.withLock { $0 += batch } },
      onEnd: { error in received.ended.withLock { $0 = .some(error) } })
  }

  /// Waits (at most 10 s) until `done` holds.
  static func eventually(_ done: () -> Bool) async throws {
    let limit = ContinuousClock.now + .seconds(10)
    while !done(), ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
  }

  @Test func valuesArriveInOrderThenTheEnd() async throws {
    let (fd, peer) = try seqpacketPair()
    let received = Received()
    let socket = Self.reader(fd, into: received)
    let values: [[UInt8]] = [[1], [], [2, 3], [UInt8](repeating: 9, count: 244)]
    for value in values {
      #expect(value.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, 0) } == value.count)
      // Later values after a pause: each wakes the reader on its own.
      try await Task.sleep(for: .milliseconds(20))
    }
    close(peer)
    try await Self.eventually { received.ended.withLock { $0 != nil } }
    #expect(received.values.withLock { $0 } == values)
    let end = received.ended.withLock { $0 ?? nil }
    #expect((end as? BluetoothError)?.code == .disconnected)
    _ = socket
  }

  /// A burst ends where `FIONREAD` shows nothing behind the value just read, and an empty
  /// value adds nothing to that figure: the empty values queued behind the last non-empty one
  /// are still read (the reactor calls the reader again while the socket is readable), before
  /// the peer closes anything.
  @Test func emptyValuesBehindTheLastByteAreRead() async throws {
    let (fd, peer) = try seqpacketPair()
    defer { close(peer) }
    let values: [[UInt8]] = [[5], [], [6, 7], [], []]
    // Queued before the reader starts: its first wake-up finds them all.
    for value in values {
      #expect(value.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, 0) } == value.count)
    }
    let received = Received()
    let socket = Self.reader(fd, into: received)
    try await Self.eventually { received.values.withLock { $0.count } == values.count }
    #expect(received.values.withLock { $0 } == values)
    #expect(received.ended.withLock { $0 } == nil)
    socket.cancel()
  }

  @Test func cancellingClosesTheSocket() async throws {
    let (fd, peer) = try seqpacketPair()
    defer { close(peer) }
    let received = Received()
    let socket = Self.reader(fd, into: received)
    try await Task.sleep(for: .milliseconds(100))
    socket.cancel()
    // The reader's end closed its socket: the peer reads the end of the stream.
    var buffer = [UInt8](repeating: 0, count: 16)
    var count = -1
    try await Self.eventually {
      count = recv(peer, &buffer, buffer.count, Int32(MSG_DONTWAIT))
      return count == 0
    }
    #expect(count == 0)
    // Cancelling reports no end.
    #expect(received.ended.withLock { $0 } == nil)
  }

  @Test func readersShareTheReactorsThread() async throws {
    // Every reader is read on the reactor's thread: 32 open readers leave no thread waiting in
    // poll(2) (a reader with a thread of its own would add 32; tests running meanwhile may
    // poll for a moment).
    _ = Reactor.shared
    let before = threadsBlockedInPoll()
    var pairs: [(Int32, Int32)] = []
    var readers: [NotificationSocket] = []
    let received = Received()
    for _ in 0..<32 {
      let (fd, peer) = try seqpacketPair()
      pairs.append((fd, peer))
      readers.append(Self.reader(fd, into: received))
    }
    for (_, peer) in pairs {
      var byte: UInt8 = 5
      #expect(send(peer, &byte, 1, 0) == 1)
    }
    try await Self.eventually { received.values.withLock { $0.count } == 32 }
    #expect(received.values.withLock { $0.count } == 32)
    let during = threadsBlockedInPoll()
    #expect(during - before < 16, "in poll before \(before), with 32 readers \(during)")
    for (_, peer) in pairs { close(peer) }
    try await Self.eventually { received.ended.withLock { $0 != nil } }
    _ = readers
  }
}
