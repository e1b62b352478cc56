// A NotificationStream whose consumer does not read for a while: it holds at most its bound of
// unread values, keeps the first ones in order, and counts every value it dropped (on the
// AcquireNotify socket's path and on StartNotify's through a real dbus-daemon).
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct NotificationBufferLimitTests {
  /// The socket's sender (bluetoothd) sends far more than the bound while nobody iterates
  /// the stream: the reader keeps reading (so bluetoothd never meets a full socket), keeps
  /// `bufferLimit` values and counts the rest.
  @Test func aSocketStreamNobodyReadsStaysAtItsBoundAndCountsTheRest() async throws {
    let (reader, sender) = try NotificationStreamTests.socketPair()
    let limit = NotificationStream.bufferLimit
    let count = limit + 1_808
    let stream = NotificationStreamTests.stream(reading: reader)
    // Blocking sends: they all complete only if the reader goes on reading the socket.
    let sent = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
      Thread {
        done.resume(
          returning: NotificationStreamTests.sendValues(0..<count, to: sender, waiting: true))
      }
      .start()
    }
    #expect(sent)
    // The loss check reads what is still in the socket first.
    let check = await stream.lossCheck()
    #expect(stream.buffer.unread == limit)
    #expect(stream.droppedValues == count - limit)
    #expect(check == .droppedUnread(count: count - limit, limit: limit))
    #expect(check.lossPossible)
    close(sender)
    let drained = await NotificationStreamTests.drain(stream)
    // The first `limit` values, in order, then the end: the later ones were dropped.
    #expect(drained.values.count == limit)
    let firstInOrder = drained.values == (0..<limit).map(NotificationStreamTests.value)
    #expect(firstInOrder)
    #expect(drained.error?.code == .disconnected)
    #expect(stream.droppedValues == count - limit)
  }

  /// A consumer that reads again makes room: values that come after it caught up are kept.
  @Test func roomComesBackAsTheConsumerReads() async throws {
    let (reader, sender) = try NotificationStreamTests.socketPair()
    defer { close(sender) }
    let limit = 10
    let stream = NotificationStream.reading(
      socket: reader, mtu: 247, bufferLimit: limit, explain: { $0 }, watch: { _ in })
    #expect(NotificationStreamTests.sendValues(0..<15, to: sender))
    _ = await stream.lossCheck()
    #expect(stream.droppedValues == 5)
    var values = stream.makeAsyncIterator()
    for index in 0..<limit {
      #expect(try await values.next() == NotificationStreamTests.value(index))
    }
    #expect(NotificationStreamTests.sendValues(100..<103, to: sender))
    for index in 100..<103 {
      #expect(try await values.next() == NotificationStreamTests.value(index))
    }
    #expect(stream.droppedValues == 5)
    await stream.stop()
  }

  /// StartNotify's PropertiesChanged signals, through a real dbus-daemon, to a stream nobody
  /// iterates: it holds its bound and counts the rest; the loss check, which has nothing to
  /// say of StartNotify otherwise, reports the drop.
  @Test func aStartNotifyStreamNobodyReadsStaysAtItsBoundAndCountsTheRest() async throws {
    let limit = 100
    let later = (0..<300).map { [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8)] }
    try await NotificationPathTests.with(flags: ["notify"], later: later) { peripheral, remote in
      let stream = try await peripheral.notifications(
        for: remote, preferAcquire: false, bufferLimit: limit)
      #expect(stream.method == .startNotify)
      // Every signal has arrived once kept and dropped add up to them (the early one too).
      #expect(await eventually { stream.buffer.unread + stream.droppedValues == later.count + 1 })
      #expect(stream.buffer.unread == limit)
      #expect(stream.droppedValues == later.count + 1 - limit)
      #expect(
        await stream.lossCheck() == .droppedUnread(count: later.count + 1 - limit, limit: limit))
      let first = await NotificationPathTests.first(limit, of: stream)
      #expect(first == [NotificationPathTests.early] + later.prefix(limit - 1))
      await stream.stop()
    }
  }
}
