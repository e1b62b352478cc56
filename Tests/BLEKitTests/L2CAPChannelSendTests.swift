// L2CAPChannel's sends to a peer that takes nothing, over a Unix SOCK_SEQPACKET pair (this
// machine's kernel has no Bluetooth): a send waiting for room in the kernel wakes every
// sendWakeInterval to look at the channel, so closing the channel ends it. (On an LE channel
// the kernel's shutdown does not wake such a send: the l2cap suite's cut link hung a listener
// that way; docs/l2cap.md.)
import Synchronization
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct L2CAPChannelSendTests {
  /// A channel whose peer end is a bare socket that nobody reads.
  static func channelToSilentPeer() throws -> (channel: L2CAPChannel, fd: Int32, peer: Int32) {
    var fds: [Int32] = [-1, -1]
    let result = fds.withUnsafeMutableBufferPointer {
      socketpair(
        AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, $0.baseAddress)
    }
    try #require(result == 0)
    return (L2CAPChannel(seqpacket: fds[0], sendMTU: 4096, receiveMTU: 4096), fds[0], fds[1])
  }

  @Test func theSocketsSendTimeoutIsTheWakeInterval() throws {
    let (channel, fd, peer) = try Self.channelToSilentPeer()
    defer {
      channel.close()
      close(peer)
    }
    var value = timeval()
    var length = socklen_t(MemoryLayout<timeval>.size)
    try #require(getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, &length) == 0)
    let set = Duration.seconds(value.tv_sec) + .microseconds(value.tv_usec)
    #expect(set == L2CAPChannelCore.sendWakeInterval)
  }

  @Test func aSendWaitingForRoomEndsWhenTheChannelCloses() async throws {
    let (channel, _, peer) = try Self.channelToSilentPeer()
    defer { close(peer) }
    let sent = Atomic(0)
    let sender = Task { () -> L2CAPError? in
      do throws(L2CAPError) {
        while true {
          try await channel.send([UInt8](repeating: 7, count: 4096))
          sent.add(1, ordering: .relaxed)
        }
      } catch {
        return error
      }
    }
    // Until the kernel's buffer is full and the send waits (more than one wake interval): some
    // sends went through and no more for 700 ms. A loaded machine may start the sender late,
    // so no send yet is not yet a full buffer (bounded at 30 s).
    var last = -1
    let waitLimit = ContinuousClock.now + .seconds(30)
    while sent.load(ordering: .relaxed) != last || last == 0, ContinuousClock.now < waitLimit {
      last = sent.load(ordering: .relaxed)
      try await Task.sleep(for: .milliseconds(700))
    }
    let closed = ContinuousClock.now
    channel.close()
    let error = await sender.value
    #expect(error?.code == .closed)
    #expect(ContinuousClock.now - closed < .seconds(3))
    #expect(last > 0)
  }
}
