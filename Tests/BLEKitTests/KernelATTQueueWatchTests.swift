// KernelATTQueueWatch: /proc/net/l2cap listings parsed, samples taken on the first value and
// every sampleInterval values after it, and a stream whose kernel queue was seen half full
// reporting kernelMayHaveDropped while its own socket stayed shallow.
import Foundation
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

@Suite(.timeLimit(.minutes(1))) struct KernelATTQueueWatchTests {
  /// A listing as Linux 6.1 prints it, with the given Rmem figures (one socket each).
  static func listing(_ queues: [Int]) -> String {
    "sk               RefCnt Rmem   Wmem   User   Inode  Parent\n"
      + queues.enumerated().map { index, rmem in
        "00000000\(String(format: "%08x", 0x65b7_0120 + index)) 2      "
          + "\(rmem)".padding(toLength: 6, withPad: " ", startingAt: 0)
          + " 0      0      \(10177 + index)  0     \n"
      }.joined()
  }

  /// A file holding `text`, removed when the test's scope ends.
  static func file(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("l2cap-\(UUID().uuidString)").path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  @Test func theDeepestQueueIsTheLargestRmem() {
    let text = Self.listing([0, 89_088, 768, 29_184])
    #expect(KernelATTQueueWatch.deepestQueue(inListing: Array(text.utf8)) == 89_088)
    #expect(KernelATTQueueWatch.deepestQueue(inListing: Array(Self.listing([]).utf8)) == 0)
    // Not a listing of sockets (no Rmem column third): no figure rather than a wrong one.
    #expect(KernelATTQueueWatch.deepestQueue(inListing: Array("sk RefCnt\n0 2\n".utf8)) == nil)
    #expect(KernelATTQueueWatch.deepestQueue(inListing: []) == nil)
    // A field that is not a number is skipped.
    let odd = Self.listing([768]) + "000000000000abcd 2      lots   0      0      1  0\n"
    #expect(KernelATTQueueWatch.deepestQueue(inListing: Array(odd.utf8)) == 768)
  }

  @Test func noListingMeansNoFigureAndNoSuspicion() {
    var watch = KernelATTQueueWatch(listing: "/nonexistent/l2cap", receiveBuffer: 212_992)
    for _ in 0..<40 { watch.valueRead() }
    #expect(watch.peak == nil)
    #expect(!watch.suspected)
    #expect(watch.limit == 106_496)
  }

  @Test func samplesFollowTheValuesRead() throws {
    let path = try Self.file(Self.listing([1_536]))
    defer { unlink(path) }
    var watch = KernelATTQueueWatch(listing: path, receiveBuffer: 212_992)
    watch.valueRead()  // the first value: a sample
    #expect(watch.peak == 1_536)
    try Self.listing([150_000]).write(toFile: path, atomically: true, encoding: .utf8)
    for _ in 1..<KernelATTQueueWatch.sampleInterval { watch.valueRead() }
    #expect(watch.peak == 1_536)  // no sample in between
    watch.valueRead()  // value number sampleInterval + 1: the next sample
    #expect(watch.peak == 150_000)
    #expect(watch.suspected)
    try Self.listing([0]).write(toFile: path, atomically: true, encoding: .utf8)
    for _ in 0..<KernelATTQueueWatch.sampleInterval { watch.valueRead() }
    #expect(watch.peak == 150_000)  // the peak stays
  }

  /// Sends 40 values over a shallow socket while the listing shows `rmem`, and returns the
  /// stream's loss check.
  static func check(kernelQueue rmem: Int) async throws -> NotificationLossCheck {
    let path = try file(listing([768, rmem]))
    defer { unlink(path) }
    let (reader, sender) = try NotificationStreamTests.socketPair()
    #expect(NotificationStreamTests.sendValues(0..<40, to: sender))
    close(sender)
    let stream = NotificationStream.reading(
      socket: reader, mtu: 247,
      attQueue: KernelATTQueueWatch(listing: path, receiveBuffer: 212_992),
      explain: { $0 }, watch: { _ in })
    let drained = await NotificationStreamTests.drain(stream)
    #expect(drained.values.count == 40)
    let check = await stream.lossCheck()
    await stream.stop()
    return check
  }

  @Test func aKernelQueueSeenHalfFullMayHaveDropped() async throws {
    let check = try await Self.check(kernelQueue: 212_992)
    #expect(check == .kernelMayHaveDropped(queuedBytes: 212_992, limit: 106_496))
    #expect(check.lossPossible)
    #expect(check.peakBytes == nil)
    #expect(check.reason.contains("212992 bytes (limit 106496)"))
  }

  @Test func aKernelQueueUnderHalfDroppedNothing() async throws {
    // 89,088 bytes: the deepest queue a lab flood reached without a loss (116 PDUs at MTU 23).
    let check = try await Self.check(kernelQueue: 89_088)
    guard case .noneDropped(let peak, _) = check else {
      Issue.record("expected noneDropped, got \(check)")
      return
    }
    #expect(peak == 40 * 1_280)
  }
}
