// L2CAPMessageTransfer end to end over a Unix SOCK_SEQPACKET pair (the framing is the same on
// an L2CAP channel; this machine's kernel has no Bluetooth): a message arrives byte-exact and
// acknowledged, and the sender keeps at most a window's worth unconfirmed, so a receiver that
// does not read cannot be flooded (the Linux 6.1 LE receive path reorders SDUs when its
// socket's queue fills: docs/l2cap.md).
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct L2CAPMessageTransferTests {
  static let mtu = 672

  static func channels() throws -> (sender: L2CAPChannel, receiver: L2CAPChannel) {
    let (one, other) = try seqpacketPair()
    return (
      L2CAPChannel(seqpacket: one, sendMTU: mtu, receiveMTU: mtu),
      L2CAPChannel(seqpacket: other, sendMTU: mtu, receiveMTU: mtu)
    )
  }

  static func message(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 9) }
  }

  @Test func aMessageArrivesExactAndAcknowledged() async throws {
    let (sender, receiver) = try Self.channels()
    let message = Self.message(1 << 20)
    async let received = L2CAPMessageTransfer.receive(over: receiver, limit: 1 << 24)
    try await L2CAPMessageTransfer.send(message, over: sender)
    sender.close()
    #expect(try await received == message)
    receiver.close()
  }

  @Test func theSenderWaitsForTheReceiverAfterAWindow() async throws {
    let (sender, receiver) = try Self.channels()
    let message = Self.message(256 * 1024)
    let sent = Mutex(0)
    let sending = Task {
      try await L2CAPMessageTransfer.send(message, over: sender) { count, _ in
        sent.withLock { $0 = count }
      }
    }
    // Nobody receives: the sender stops at the window (plus one SDU). Wait until it has sent
    // that much and then nothing more for half a second (at most 10 s: a loaded machine is slow).
    var early = 0
    for _ in 0..<20 {
      try await Task.sleep(for: .milliseconds(500))
      let now = sent.withLock { $0 }
      if now == early && now >= L2CAPMessageWindow.size { break }
      early = now
    }
    #expect(early >= L2CAPMessageWindow.size)
    #expect(early < L2CAPMessageWindow.size + Self.mtu)
    async let received = L2CAPMessageTransfer.receive(over: receiver, limit: 1 << 24)
    try await sending.value
    sender.close()
    #expect(try await received == message)
    receiver.close()
  }

  @Test func aVersion1SenderIsStillReceived() async throws {
    let (sender, receiver) = try Self.channels()
    let message = Self.message(100_000)
    async let received = L2CAPMessageTransfer.receive(over: receiver, limit: 1 << 24)
    // What a version 1 sender does: the header, every SDU, then it waits for "ACK".
    var header = L2CAPMessageHeader(for: message)
    header.version = 1
    try await sender.send(header.bytes)
    try await sender.write(message)
    var answers = sender.incoming.makeAsyncIterator()
    let answer = try await answers.next()
    #expect(answer.flatMap(L2CAPMessageAcknowledgement.init(bytes:))?.checksum == header.checksum)
    sender.close()
    #expect(try await received == message)
    receiver.close()
  }

  @Test func aSenderThatVanishesMidMessageIsACutWithTheByteCount() async throws {
    let (sender, receiver) = try Self.channels()
    let message = Self.message(100_000)
    // A version 2 sender that sends the header and 10,000 bytes (past the first window step,
    // so the receiver then writes a confirmation) and closes: it was killed.
    try await sender.send(L2CAPMessageHeader(for: message).bytes)
    try await sender.write(Array(message[..<10_000]))
    sender.close()
    let error = await #expect(throws: BluetoothError.self) {
      _ = try await L2CAPMessageTransfer.receive(over: receiver, limit: 1 << 24)
    }
    #expect(error?.code == .transferInterrupted)
    #expect(error?.interruptedTransfer?.bytesReceived == 10_000)
    #expect(error?.interruptedTransfer?.bytesExpected == 100_000)
    #expect(error?.interruptedTransfer?.cause == nil)
    #expect(error?.message == "the channel ended after 10000 of 100000 bytes")
    receiver.close()
  }

  @Test func aSilentReceiverFailsTheSend() async throws {
    let (sender, receiver) = try Self.channels()
    await #expect(throws: BluetoothError.timedOut(.idle(.seconds(1)), done: 0, total: 100_000)) {
      try await L2CAPMessageTransfer.send(
        Self.message(100_000), over: sender,
        deadlines: TransferDeadlines(deadline: .seconds(30), idleTimeout: .seconds(1)))
    }
    sender.close()
    receiver.close()
  }

  /// Runs `body`; when it has not ended after `limit`, records an issue and closes `channels`
  /// (which ends any wait on them), so a transfer without limits fails the test instead of
  /// holding it.
  static func bounded<T: Sendable>(
    _ limit: Duration, closing channels: [L2CAPChannel],
    _ body: @escaping @Sendable () async throws -> T
  ) async -> (Result<T, any Error>, Duration) {
    let start = ContinuousClock.now
    let guardTask = Task {
      try await Task.sleep(for: limit)
      Issue.record("the transfer was still waiting after \(limit)")
      for channel in channels { channel.close() }
    }
    defer { guardTask.cancel() }
    let result: Result<T, any Error>
    do {
      result = .success(try await body())
    } catch {
      result = .failure(error)
    }
    return (result, ContinuousClock.now - start)
  }

  /// A trickle every 100 ms never goes 1.9 s without progress, even on a loaded machine.
  static let short = TransferDeadlines(deadline: .seconds(2), idleTimeout: .milliseconds(1900))

  @Test func aSenderThatTricklesForeverMeetsTheDeadline() async throws {
    let (sender, receiver) = try Self.channels()
    // The header announces 1 MiB; then one byte every 100 ms: progress, never the end.
    try await sender.send(L2CAPMessageHeader(length: 1 << 20, checksum: 0).bytes)
    let trickle = Task {
      while !Task.isCancelled {
        try await sender.send([0x55])
        try await Task.sleep(for: .milliseconds(100))
      }
    }
    defer { trickle.cancel() }
    let (result, took) = await Self.bounded(.seconds(10), closing: [sender, receiver]) {
      try await L2CAPMessageTransfer.receive(over: receiver, limit: 1 << 24, deadlines: Self.short)
    }
    guard case .failure(let error as BluetoothError) = result,
      let cut = error.interruptedTransfer, cut.expiry == .deadline(.seconds(2)),
      cut.cause == .timeout, cut.bytesExpected == 1 << 20
    else {
      Issue.record("expected the deadline to end it, got \(result)")
      return
    }
    #expect(cut.bytesReceived > 0)
    #expect(cut.chunksReceived == cut.bytesReceived)
    #expect(took < .seconds(8))
    sender.close()
    receiver.close()
  }

  @Test func aSenderThatGoesQuietAfterTheHeaderMeetsTheIdleTimeout() async throws {
    let (sender, receiver) = try Self.channels()
    try await sender.send(L2CAPMessageHeader(length: 1 << 20, checksum: 0).bytes)
    try await sender.send([1, 2, 3])
    let (result, took) = await Self.bounded(.seconds(10), closing: [sender, receiver]) {
      try await L2CAPMessageTransfer.receive(
        over: receiver, limit: 1 << 24,
        deadlines: TransferDeadlines(deadline: .seconds(30), idleTimeout: .seconds(1)))
    }
    guard case .failure(let error as BluetoothError) = result,
      error == .timedOut(.idle(.seconds(1)), done: 3, sdus: 1, total: 1 << 20)
    else {
      Issue.record("expected the idle timeout to end it, got \(result)")
      return
    }
    #expect(took < .seconds(8))
    sender.close()
    receiver.close()
  }

  @Test func aReceiverThatConfirmsWithoutProgressFailsTheSend() async throws {
    let (sender, receiver) = try Self.channels()
    // A receiver that answers every 100 ms, always confirming nothing new: traffic without
    // progress. The sender stops at its window and must give up after the idle timeout.
    let chatter = Task {
      while !Task.isCancelled {
        try await receiver.send(L2CAPMessageWindow(received: 0).bytes)
        try await Task.sleep(for: .milliseconds(100))
      }
    }
    defer { chatter.cancel() }
    let (result, took) = await Self.bounded(.seconds(25), closing: [sender, receiver]) {
      try await L2CAPMessageTransfer.send(
        Self.message(100_000), over: sender,
        deadlines: TransferDeadlines(deadline: .seconds(30), idleTimeout: .seconds(1)))
    }
    guard case .failure(let error as BluetoothError) = result,
      error == .timedOut(.idle(.seconds(1)), done: 0, total: 100_000)
    else {
      Issue.record("expected the idle timeout to end it, got \(result)")
      return
    }
    // Well before the 30 s deadline: the idle timeout ended it (a loaded run took 8.2 s).
    #expect(took < .seconds(25))
    sender.close()
    receiver.close()
  }
}
