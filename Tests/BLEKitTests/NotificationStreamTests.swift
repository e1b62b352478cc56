// NotificationStream over an AcquireNotify-like SOCK_SEQPACKET pair: what one burst of reads
// brings is one batch, handed out value by value, complete and in order; an end after a burst
// (a disconnection, the socket closed) comes after the burst's values; stop() closes the socket.
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

@Suite(.timeLimit(.minutes(1))) struct NotificationStreamTests {
  /// Value number `index`: 244 bytes (a full value at the MTU of 247), the index in the first
  /// four (big-endian).
  static func value(_ index: Int) -> [UInt8] {
    withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
      + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 240)
  }

  /// A connected SOCK_SEQPACKET pair, as bluetoothd makes for AcquireNotify: the reader's end
  /// and the sender's (blocking).
  static func socketPair() throws -> (reader: Int32, sender: Int32) {
    try seqpacketPair()
  }

  /// Sends values `range`, one datagram each; without `waiting`, fails (false) rather than
  /// waits when the socket is full.
  static func sendValues(_ range: Range<Int>, to fd: Int32, waiting: Bool = false) -> Bool {
    let flags = waiting ? 0 : Int32(MSG_DONTWAIT)
    for index in range {
      let bytes = value(index)
      let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, flags) }
      if sent != bytes.count { return false }
    }
    return true
  }

  static func stream(
    reading fd: Int32, watch: @escaping @Sendable (NotificationSocket) async -> Void = { _ in }
  ) -> NotificationStream {
    NotificationStream.reading(socket: fd, mtu: 247, explain: { $0 }, watch: watch)
  }

  /// What a stream delivered up to its end.
  struct Drained: Sendable {
    var values: [[UInt8]] = []
    /// The error it ended with, when it was a BluetoothError.
    var error: BluetoothError?
    /// Whether it ended with another error.
    var otherError = false
    /// Whether it did not end within the limit.
    var timedOut = false
  }

  /// Reads `stream` to its end, through its public iterator (at most ten seconds).
  static func drain(_ stream: NotificationStream) async -> Drained {
    await within(.seconds(10)) {
      var drained = Drained()
      do {
        for try await value in stream { drained.values.append(value) }
      } catch let error as BluetoothError {
        drained.error = error
      } catch {
        drained.otherError = true
      }
      return drained
    }.value ?? Drained(timedOut: true)
  }

  @Test func oneBurstIsOneBatch() async throws {
    let (reader, sender) = try Self.socketPair()
    defer { close(sender) }
    #expect(Self.sendValues(0..<100, to: sender))
    let stream = Self.stream(reading: reader)
    var values = stream.makeAsyncIterator()
    let batch = try await values.nextBatch()
    #expect(batch?.count == 100)
    #expect(batch.map(Array.init) == (0..<100).map(Self.value))
    await stream.stop()
  }

  @Test func manyValuesArriveCompleteAndInOrder() async throws {
    let (reader, sender) = try Self.socketPair()
    // A burst waiting before the reader starts, then more than the socket holds (so the
    // sender waits for the reader, and bursts exceed the batch limit), then the socket closed.
    #expect(Self.sendValues(0..<100, to: sender))
    let count = 5000
    Thread {
      _ = Self.sendValues(100..<count, to: sender, waiting: true)
      close(sender)
    }.start()
    let drained = await Self.drain(Self.stream(reading: reader))
    #expect(drained.values.count == count)
    #expect(drained.values == (0..<count).map(Self.value))
    // The socket closed by the sender (bluetoothd) is a disconnection.
    #expect(drained.error?.code == .disconnected)
    #expect(!drained.otherError && !drained.timedOut)
  }

  @Test func aDisconnectionAfterABurstDeliversTheBurstFirst() async throws {
    let (reader, sender) = try Self.socketPair()
    defer { close(sender) }
    #expect(Self.sendValues(0..<150, to: sender))
    // The link is lost at once, with the burst still in the socket, unread.
    let stream = Self.stream(reading: reader) { reader in
      reader.finish(after: BluetoothError(.disconnected, "peer disconnected"))
    }
    let drained = await Self.drain(stream)
    #expect(drained.values == (0..<150).map(Self.value))
    #expect(drained.error?.code == .disconnected)
    #expect(drained.error?.message == "peer disconnected")
  }

  @Test func batchesAreHandedOutValueByValueThenTheEnd() async throws {
    let (batches, continuation) = NotificationStream.makeBatches()
    let stream = NotificationStream(
      batches: batches, buffer: NotificationBuffer(limit: NotificationStream.bufferLimit),
      subscription: NotificationSubscription {}, method: .startNotify, reader: nil)
    continuation.yield([Self.value(0)])
    continuation.yield([])
    continuation.yield((1..<300).map(Self.value))
    continuation.yield([Self.value(300)])
    continuation.finish(throwing: BluetoothError(.disconnected, "peer disconnected"))
    let drained = await Self.drain(stream)
    #expect(drained.values == (0...300).map(Self.value))
    #expect(drained.error?.code == .disconnected)
  }

  /// A consumer that diverts the stream to a sink on the reader's thread (as a transfer
  /// does): the values before the marker come through the stream, every later one through the
  /// sink, each once and in order, and a sink that says it is done wakes the consumer with a
  /// second marker before the end.
  @Test func aDivertedStreamHandsEveryValueOnceInOrder() async throws {
    let (reader, sender) = try Self.socketPair()
    #expect(Self.sendValues(0..<100, to: sender))
    let stream = Self.stream(reading: reader)
    let sunk = Mutex<[[UInt8]]>([])
    let last = Self.value(2_999)
    #expect(
      stream.divert { burst in
        var done = false
        while let value = burst.next({ Array($0) }) {
          sunk.withLock { $0.append(value) }
          done = value == last
        }
        return done
      })
    // The rest is sent once the switch is in the stream: `divert` takes effect on the reader's
    // thread, and a loaded machine can run it after a sender started at once had sent it all
    // (seen once in a full test run: every value came through the stream, one marker).
    let startSender: @Sendable () -> Void = {
      Thread {
        _ = Self.sendValues(100..<3_000, to: sender, waiting: true)
        close(sender)
      }.start()
    }
    let outcome = await within(.seconds(10)) {
      var values = stream.makeAsyncIterator()
      var before: [[UInt8]] = []
      var markers = 0
      do {
        while let batch = try await values.nextBatchOrMarker() {
          if batch.isEmpty {
            markers += 1
            if markers == 1 { startSender() }
          } else {
            // Only values before the first marker may come through the stream.
            if markers > 0 { return (before, -1) }
            before += batch
          }
        }
      } catch {}
      return (before, markers)
    }
    guard case .finished(let (before, markers)) = outcome else {
      Issue.record("the diverted stream did not end")
      return
    }
    #expect(markers == 2)
    #expect(before + sunk.withLock { $0 } == (0..<3_000).map(Self.value))
    await stream.stop()
  }

  @Test func stopClosesTheSocket() async throws {
    let (reader, sender) = try Self.socketPair()
    defer { close(sender) }
    let socket = Self.inode(of: reader)
    let stream = Self.stream(reading: reader)
    await stream.stop()
    _ = fcntl(sender, F_SETFL, fcntl(sender, F_GETFL) | O_NONBLOCK)
    var byte: UInt8 = 0
    // The reader's end shut down: the sender's end reads end-of-file.
    #expect(await eventually { read(sender, &byte, 1) == 0 })
    // And closed, not only shut down: its number no longer names that socket.
    #expect(await eventually { Self.inode(of: reader) != socket })
  }

  @Test func valuesThatComeOneAtATimeArriveEachInTurnThenTheEnd() async throws {
    // A slow link: each value alone in the socket, the reader waiting in between.
    let (reader, sender) = try Self.socketPair()
    let socket = Self.inode(of: reader)
    let count = 40
    Thread {
      for index in 0..<count {
        _ = Self.sendValues(index..<(index + 1), to: sender, waiting: true)
        usleep(2_000)
      }
      close(sender)
    }.start()
    let drained = await Self.drain(Self.stream(reading: reader))
    #expect(drained.values == (0..<count).map(Self.value))
    #expect(drained.error?.code == .disconnected)
    #expect(await eventually { Self.inode(of: reader) != socket })
  }

  /// Sends each of `values` as one datagram (an empty one for an empty value, as bluetoothd
  /// does for a zero-length notification).
  static func sendDatagrams(_ values: [[UInt8]], to fd: Int32) -> Bool {
    values.allSatisfy { bytes in
      bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        == bytes.count
    }
  }

  /// A zero-length notification is a value, not the end of the stream (which reads as 0 bytes
  /// too): empty values first, between others and last, then the socket closed, all queued
  /// before the reader starts, so the reader meets them in one burst with the end right after.
  @Test func emptyValuesAreValuesAndTheEndStillEnds() async throws {
    let (reader, sender) = try Self.socketPair()
    let values: [[UInt8]] = [[], [], Array("a".utf8), [], Array("bc".utf8), [], []]
    #expect(Self.sendDatagrams(values, to: sender))
    close(sender)
    let drained = await Self.drain(Self.stream(reading: reader))
    #expect(drained.values == values)
    #expect(drained.error?.code == .disconnected)
    #expect(!drained.otherError && !drained.timedOut)
  }

  /// Empty values that come one at a time, the reader waiting in between (each alone in the
  /// socket), then a disconnection noticed by the link watch, not by the socket.
  @Test func emptyValuesOneAtATimeThenALinkLoss() async throws {
    let (reader, sender) = try Self.socketPair()
    defer { close(sender) }
    let sent = Mutex(0)
    let stream = Self.stream(reading: reader) { reader in
      while sent.withLock({ $0 }) < 6 { try? await Task.sleep(for: .milliseconds(5)) }
      reader.finish(after: BluetoothError(.disconnected, "peer disconnected"))
    }
    Thread {
      for index in 0..<6 {
        _ = Self.sendDatagrams([index % 2 == 0 ? [] : [UInt8(index)]], to: sender)
        usleep(3_000)
        sent.withLock { $0 += 1 }
      }
    }.start()
    let drained = await Self.drain(stream)
    #expect(drained.values == [[], [1], [], [3], [], [5]])
    #expect(drained.error?.message == "peer disconnected")
  }

  /// The inode of what `fd` names, or nil when it names nothing (closed).
  static func inode(of fd: Int32) -> UInt? {
    var status = stat()
    return fstat(fd, &status) == 0 ? UInt(status.st_ino) : nil
  }
}
