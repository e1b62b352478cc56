// What notify and explore --listen end with when their stream dropped values because standard
// output was read too slowly: one line with the count, exit 13 through the one exit table.
import ArgumentParsing
import Foundation
import TestSupport
import Testing

@testable import BLEKit
@testable import blekit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct DroppedValuesExitTests {
  /// A stream of bound 4 over a socket pair, fed `count` one-byte values while nobody reads it.
  static func stream(fedWith count: Int) async throws -> (NotificationStream, sender: Int32) {
    let (reader, sender) = try seqpacketPair()
    let stream = NotificationStream.reading(
      socket: reader, mtu: 23, bufferLimit: 4, explain: { $0 }, watch: { _ in })
    for index in 0..<count {
      var byte = UInt8(index)
      #expect(send(sender, &byte, 1, 0) == 1)
    }
    // The loss check reads what is still in the socket first.
    _ = await stream.lossCheck()
    return (stream, sender)
  }

  @Test func aStreamThatDroppedValuesEndsNotifyWithItsCountAndExit13() async throws {
    // One that kept within its bound says nothing.
    let (kept, keptSender) = try await Self.stream(fedWith: 4)
    defer { close(keptSender) }
    #expect(NotifyCommand.droppedLine(kept) == nil)
    await kept.stop()
    let (stream, sender) = try await Self.stream(fedWith: 10)
    defer { close(sender) }
    let line = try #require(NotifyCommand.droppedLine(stream))
    #expect(line.hasPrefix("6 values were dropped: standard output was not read fast enough"))
    let report = ErrorReport(droppedValuesError(line))
    #expect(report.status == .outputFailed)
    #expect(report.status.rawValue == 13)
    #expect(report.message == line)
    await stream.stop()
  }
}
