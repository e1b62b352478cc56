import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

// Writes without response through AcquireWrite's socket, against a stand-in org.bluez on a
// private bus that hands out one end of a real socket pair and keeps the other, as bluetoothd
// does: each value one datagram, back-pressure when the socket is full, closing gives it back.
@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1)))
struct WriteWithoutResponseChannelTests {
  /// Reads every datagram waiting on `fd` (non-blocking).
  static func drain(_ fd: Int32) -> [[UInt8]] {
    var values: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: 600)
    while true {
      let count = buffer.withUnsafeMutableBytes {
        recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
      }
      guard count > 0 else { return values }
      values.append(Array(buffer[0..<count]))
    }
  }

  /// Whether `fd` reads the end of the stream within `milliseconds` (waiting off the
  /// cooperative pool's threads, since the close it waits for may need one of them).
  static func readsEndOfStream(_ fd: Int32, within milliseconds: Int) async -> Bool {
    guard await readable(fd, within: .milliseconds(milliseconds)) else { return false }
    var byte: UInt8 = 0
    return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
  }

  @Test func eachValueIsOneDatagramInOrder() async throws {
    try await RemoteGattFixture.with(flags: ["write-without-response"]) {
      bluez, peripheral, remote, kept in
      let channel = try await peripheral.openWriteWithoutResponseChannel(for: remote)
      #expect(channel.mtu == 50)
      #expect(channel.maximumValueLength == 47)
      let values = (0..<10).map { index in [UInt8](repeating: UInt8(index), count: 1 + index * 5) }
      for value in values { try await channel.send(value) }
      let theirs = kept.fd.withLock { $0 }
      #expect(Self.drain(theirs) == values)
      // Too long for the link, and empty: refused before anything is sent.
      await #expect(throws: BluetoothError.self) {
        try await channel.send([UInt8](repeating: 1, count: 48))
      }
      await #expect(throws: BluetoothError.self) { try await channel.send([]) }
      #expect(Self.drain(theirs).isEmpty)
      // Closing gives the socket back: bluetoothd's end reads the end of the stream.
      channel.close()
      let ended = await Self.readsEndOfStream(theirs, within: 5_000)
      #expect(ended)
      await #expect(throws: BluetoothError.self) { try await channel.send([1]) }
      close(theirs)
    }
  }

  @Test func aFullSocketWaitsForRoomThenTimesOut() async throws {
    try await RemoteGattFixture.with(flags: ["write-without-response"]) {
      bluez, peripheral, remote, kept in
      let channel = try await peripheral.openWriteWithoutResponseChannel(for: remote)
      let theirs = kept.fd.withLock { $0 }
      // Nobody reads: the socket fills, and a send gives up after its timeout.
      var sent = 0
      let value = [UInt8](repeating: 0xAB, count: 47)
      do throws(BluetoothError) {
        while sent < 10_000 {
          try await channel.send(value, timeout: .milliseconds(300))
          sent += 1
        }
      } catch {
        #expect(error.code == .timeout)
      }
      #expect(sent > 0 && sent < 10_000)
      #expect(await channel.drain(timeout: .milliseconds(200)) == false)
      // A reader frees room: a waiting send goes through, and nothing was lost or doubled.
      let late = Task { try await channel.send([0xCD], timeout: .seconds(10)) }
      try await Task.sleep(for: .milliseconds(200))
      var received = Self.drain(theirs)
      try await late.value
      received += Self.drain(theirs)
      #expect(received.count == sent + 1)
      #expect(received.dropLast().allSatisfy { $0 == value })
      #expect(received.last == [0xCD])
      #expect(await channel.drain(timeout: .seconds(5)))
      channel.close()
      close(theirs)
    }
  }

  @Test func aSendWaitingForRoomEndsWhenItsTaskIsCancelled() async throws {
    try await RemoteGattFixture.with(flags: ["write-without-response"]) {
      bluez, peripheral, remote, kept in
      let channel = try await peripheral.openWriteWithoutResponseChannel(for: remote)
      let theirs = kept.fd.withLock { $0 }
      // Fill the socket (nobody reads) until a send times out.
      let value = [UInt8](repeating: 0xAB, count: 47)
      var full = false
      for _ in 0..<10_000 where !full {
        do throws(BluetoothError) {
          try await channel.send(value, timeout: .milliseconds(100))
        } catch {
          full = error.code == .timeout
        }
      }
      try #require(full)
      let waiting = Task { () -> BluetoothError? in
        do throws(BluetoothError) {
          try await channel.send([0xCD], timeout: .seconds(30))
          return nil
        } catch {
          return error
        }
      }
      try await Task.sleep(for: .milliseconds(300))
      let cancelled = ContinuousClock.now
      waiting.cancel()
      #expect(await waiting.value?.code == .cancelled)
      #expect(ContinuousClock.now - cancelled < .seconds(5))
      // The value was not sent; the channel still works once there is room.
      #expect(!Self.drain(theirs).contains([0xCD]))
      try await channel.send([0xEF])
      #expect(Self.drain(theirs) == [[0xEF]])
      channel.close()
      close(theirs)
    }
  }

  @Test func aCharacteristicWithoutTheFlagIsRefusedWithoutACall() async throws {
    try await RemoteGattFixture.with(flags: ["write"]) { bluez, peripheral, remote, kept in
      await #expect(throws: BluetoothError.self) {
        _ = try await peripheral.openWriteWithoutResponseChannel(for: remote)
      }
      #expect(kept.calls.withLock { $0 } == 0)
    }
  }

  @Test func aLinkThatGoesDownEndsTheChannel() async throws {
    try await RemoteGattFixture.with(flags: ["write-without-response"]) {
      bluez, peripheral, remote, kept in
      let channel = try await peripheral.openWriteWithoutResponseChannel(for: remote)
      // bluetoothd closes its end when the link drops.
      close(kept.fd.withLock { $0 })
      do throws(BluetoothError) {
        try await channel.send([1, 2, 3])
        Issue.record("a send to a closed socket succeeded")
      } catch {
        #expect(error.code == .disconnected)
      }
    }
  }
}
