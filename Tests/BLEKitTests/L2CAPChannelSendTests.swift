// L2CAPChannel's sends to a peer that takes nothing, over a Unix SOCK_SEQPACKET pair (this
// machine's kernel has no Bluetooth): the socket is non-blocking, a send waiting for room waits
// on the Reactor, and closing the channel (which releases that wait) or cancelling the task
// ends it. (On an LE channel the kernel's shutdown does not wake a send blocked in the kernel:
// the l2cap suite's cut link hung a listener that way; docs/l2cap.md.)
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct L2CAPChannelSendTests {
  /// A channel whose peer end is a bare socket that nobody reads.
  static func channelToSilentPeer() throws -> (channel: L2CAPChannel, fd: Int32, peer: Int32) {
    let (fd, peer) = try seqpacketPair()
    return (L2CAPChannel(seqpacket: fd, sendMTU: 4096, receiveMTU: 4096), fd, peer)
  }

  @Test func theSocketIsNonBlocking() throws {
    let (channel, fd, peer) = try Self.channelToSilentPeer()
    defer {
      channel.close()
      close(peer)
    }
    #expect(fcntl(fd, F_GETFL) & O_NONBLOCK != 0)
    // The kernel's disconnection timer for close() (no send waits for it any more).
    var value = timeval()
    var length = socklen_t(MemoryLayout<timeval>.size)
    try #require(getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, &length) == 0)
    let set = Duration.seconds(value.tv_sec) + .microseconds(value.tv_usec)
    #expect(set == L2CAPChannelCore.disconnectTimeout)
  }

  /// Sends until one waits for room: some went through and no more for 700 ms (a loaded
  /// machine may start the sender late, so no send yet is not yet a full buffer; at most 30 s).
  static func waitUntilBlocked(_ sent: borrowing Atomic<Int>) async throws -> Int {
    var last = -1
    let waitLimit = ContinuousClock.now + .seconds(30)
    while sent.load(ordering: .relaxed) != last || last == 0, ContinuousClock.now < waitLimit {
      last = sent.load(ordering: .relaxed)
      try await Task.sleep(for: .milliseconds(700))
    }
    return last
  }

  @Test func aCancelledSendStopsWaitingAndTheChannelStaysOpen() async throws {
    let (channel, fd, peer) = try Self.channelToSilentPeer()
    defer {
      channel.close()
      close(peer)
    }
    let sent = Atomic(0)
    let sender = Task { () -> BluetoothError? in
      do throws(BluetoothError) {
        while true {
          try await channel.send([UInt8](repeating: 7, count: 4096))
          sent.add(1, ordering: .relaxed)
        }
      } catch {
        return error
      }
    }
    let last = try await Self.waitUntilBlocked(sent)
    #expect(last > 0)
    // The channel's reader waits for something to read; the send for room.
    #expect(Reactor.shared.pendingWaits(on: fd) == 2)
    let cancelled = ContinuousClock.now
    sender.cancel()
    let error = await sender.value
    #expect(error?.code == .channelClosed)
    #expect(ContinuousClock.now - cancelled < .seconds(3))
    #expect(Reactor.shared.pendingWaits(on: fd) == 1)
    // The peer reads one SDU: the channel, still open, takes another.
    var buffer = [UInt8](repeating: 0, count: 4096)
    #expect(read(peer, &buffer, buffer.count) == 4096)
    try await channel.send([1, 2, 3])
    #expect(!channel.isClosed)
  }

  @Test func aSendWaitingForRoomEndsWhenTheChannelCloses() async throws {
    let (channel, _, peer) = try Self.channelToSilentPeer()
    defer { close(peer) }
    let sent = Atomic(0)
    let sender = Task { () -> BluetoothError? in
      do throws(BluetoothError) {
        while true {
          try await channel.send([UInt8](repeating: 7, count: 4096))
          sent.add(1, ordering: .relaxed)
        }
      } catch {
        return error
      }
    }
    let last = try await Self.waitUntilBlocked(sent)
    let closed = ContinuousClock.now
    channel.close()
    let error = await sender.value
    #expect(error?.code == .channelClosed)
    #expect(ContinuousClock.now - closed < .seconds(3))
    #expect(last > 0)
  }
}
