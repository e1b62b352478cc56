// NotificationBacklog against the running kernel: its model of a queued value's kernel memory
// predicts how many values fill a SOCK_SEQPACKET pair (bluetoothd's AcquireNotify socket), and
// a NotificationStream whose socket filled up (a value was dropped) says so, while one with a
// shallow backlog does not.
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct NotificationBacklogTests {
  /// Values of `length` bytes written without blocking until one does not fit.
  static func valuesThatFit(length: Int) throws -> Int {
    let (reader, sender) = try NotificationStreamTests.socketPair()
    defer {
      close(reader)
      close(sender)
    }
    let value = [UInt8](repeating: 7, count: length)
    var count = 0
    while value.withUnsafeBytes({ send(sender, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) })
      == length
    {
      count += 1
    }
    return count
  }

  @Test(arguments: [1, 20, 64, 65, 128, 200, 244, 300, 509, 512])
  func theModelPredictsWhenTheSocketIsFull(length: Int) throws {
    let fit = try Self.valuesThatFit(length: length)
    let size = NotificationBacklog.kernelSize(ofValue: length)
    let buffer = NotificationBacklog.systemSenderBuffer
    // The kernel admits a value while less than the buffer is charged.
    #expect(size * (fit - 1) < buffer, "\(fit) values of \(length) bytes fit; model \(size)")
    #expect(size * fit >= buffer, "\(fit) values of \(length) bytes fit; model \(size)")
  }

  @Test func snapshotsCoverWhatWasQueued() {
    var meter = NotificationBacklog(senderBuffer: 10_000)
    #expect(meter.limit == 4_000)
    #expect(meter.needsSnapshot)
    meter.snapshot(queuedBytes: 3 * 244)
    for _ in 0..<2 { meter.record(valueLength: 244) }
    #expect(!meter.needsSnapshot)
    #expect(meter.peak == 0)
    meter.record(valueLength: 244)
    #expect(meter.needsSnapshot)
    #expect(meter.peak == 3 * 1_280)
    #expect(!meter.suspected)
    // An empty snapshot; a value that came after it counts on its own.
    meter.snapshot(queuedBytes: 0)
    meter.record(valueLength: 20)
    #expect(meter.peak == 3 * 1_280)
    // Four values queued, two read, then the socket is empty: the snapshot closes at two.
    meter.snapshot(queuedBytes: 4 * 244)
    meter.record(valueLength: 244)
    meter.record(valueLength: 244)
    meter.drained()
    #expect(meter.needsSnapshot)
    meter.snapshot(queuedBytes: 4 * 20)
    for _ in 0..<4 { meter.record(valueLength: 20) }
    #expect(meter.peak == 3 * 1_280)
    meter.snapshot(queuedBytes: 6 * 20)
    for _ in 0..<6 { meter.record(valueLength: 20) }
    #expect(meter.peak == 6 * 768)
    #expect(meter.suspected)
  }

  /// Fills a socket as a flood does (until a value is dropped), or sends `count` values,
  /// closes the sender, reads the stream to its end, and returns its loss check.
  static func check(sending count: Int?) async throws -> NotificationLossCheck {
    let (reader, sender) = try NotificationStreamTests.socketPair()
    if let count {
      #expect(NotificationStreamTests.sendValues(0..<count, to: sender))
    } else {
      var index = 0
      while NotificationStreamTests.sendValues(index..<index + 1, to: sender) { index += 1 }
    }
    close(sender)
    let stream = NotificationStreamTests.stream(reading: reader)
    let drained = await NotificationStreamTests.drain(stream)
    #expect(!drained.timedOut)
    let check = await stream.lossCheck()
    await stream.stop()
    return check
  }

  @Test func aSocketThatFilledUpMayHaveDropped() async throws {
    let check = try await Self.check(sending: nil)
    guard case .mayHaveDropped(let peak, let limit) = check else {
      Issue.record("expected mayHaveDropped, got \(check)")
      return
    }
    #expect(peak >= NotificationBacklog.systemSenderBuffer)
    #expect(limit == NotificationBacklog.systemSenderBuffer * 2 / 5)
    #expect(check.lossPossible)
  }

  @Test func aShallowBacklogDroppedNothing() async throws {
    // 40 values of 244 bytes: 51,200 bytes of kernel memory, under the limit (85,196).
    let check = try await Self.check(sending: 40)
    guard case .noneDropped(let peak, _) = check else {
      Issue.record("expected noneDropped, got \(check)")
      return
    }
    #expect(peak == 40 * 1_280)
    #expect(!check.lossPossible)
  }
}
