import CDBus
import Dispatch
import Synchronization
import Testing

// The Dispatch bridge: watch toggles and call timeouts do not pile up sources; the reading
// thread follows enable/disable and closes its descriptor when cancelled.
@testable import DBus

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct EventLoopTests {
  @Test func sourcesDoNotAccumulate() async throws {
    try await withServerAndClient { _, server, client in
      let before = client.dispatchSourceCounts
      for index in 0..<300 {
        let reply = try await callTest(client, server, "Echo", [.variant(.int32(Int32(index)))])
        #expect(reply == [.variant(.int32(Int32(index)))])
        try client.emitSignal(
          path: "/test", interface: "org.blekit.Test", member: "Noise", arguments: [])
      }
      // A timed-out call leaves nothing behind either.
      _ = await callTestResult(client, server, "Sleep", timeout: .milliseconds(50))
      let after = client.dispatchSourceCounts
      #expect(after.watches == before.watches)
      #expect(after.sources == before.sources)
      #expect(after.sources <= 2 * after.watches)
      #expect(after.timeouts == before.timeouts)
      #expect(server.dispatchSourceCounts.sources == after.sources)
    }
  }

  @Test func closingCancelsEverySource() async throws {
    try await withTestBus { bus in
      let connection = try bus.connect()
      #expect(connection.dispatchSourceCounts.watches > 0)
      connection.close()
      let counts = connection.dispatchSourceCounts
      #expect(counts.watches == 0 && counts.sources == 0 && counts.timeouts == 0)
      #expect(connection.isClosed)
    }
  }

  @Test func readingThreadFollowsItsStateAndClosesItsDescriptor() async throws {
    var ends: [Int32] = [-1, -1]
    #expect(
      socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0
    )
    let (mine, theirs) = (ends[0], ends[1])
    defer { close(mine) }
    let queue = DispatchQueue(label: "reading-thread-test")
    let received = Mutex<[UInt8]>([])
    let reader = try #require(
      ReadWatchThread(fd: theirs, queue: queue) { flags in
        if flags & DBUS_WATCH_READABLE.rawValue != 0 {
          var buffer = [UInt8](repeating: 0, count: 16)
          let count = read(theirs, &buffer, buffer.count)
          if count > 0 { received.withLock { $0 += buffer[..<count] } }
        }
        dispatchPrecondition(condition: .onQueue(queue))  // entered with queue.sync
      })
    func send(_ byte: UInt8) -> Int {
      var value = byte
      return Glibc.send(mine, &value, 1, Int32(MSG_NOSIGNAL))
    }
    // Disabled at first: input waits.
    #expect(send(1) == 1)
    try await Task.sleep(for: .milliseconds(100))
    #expect(received.withLock { $0 }.isEmpty)
    reader.resume()
    #expect(await poll { received.withLock { $0 } == [1] })
    reader.suspend()
    try await Task.sleep(for: .milliseconds(50))
    #expect(send(2) == 1)
    try await Task.sleep(for: .milliseconds(100))
    #expect(received.withLock { $0 } == [1])
    reader.resume()
    #expect(await poll { received.withLock { $0 } == [1, 2] })
    // Cancelled: the thread ends and closes its end, so sending fails with EPIPE.
    reader.cancel()
    #expect(await poll { send(3) < 0 && errno == EPIPE })
  }

  @Test func aWakeUpAfterTheThreadEndedNeverReachesAReusedDescriptor() async throws {
    // A file to put at the wake pipe's old write end once the thread closed it, as the next
    // open() of anyone else would. Opened first, so it does not take the number itself.
    let path = "/tmp/blekit-reused-fd-\(getpid())"
    defer { unlink(path) }
    let file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    try #require(file >= 0)
    defer { close(file) }
    // Tests run in parallel in this process and may take the freed number first: try again.
    var tested = false
    for _ in 0..<50 where !tested {
      var pair: [Int32] = [-1, -1]
      #expect(
        socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair)
          == 0)
      defer { close(pair[0]) }
      let reader = try #require(
        ReadWatchThread(fd: pair[1], queue: DispatchQueue(label: "reused-fd-test")) { _ in })
      reader.cancel()
      #expect(await poll { reader.isClosed })
      guard fcntl(reader.wakeWriter, F_GETFD) < 0,
        dup2(file, reader.wakeWriter) == reader.wakeWriter
      else { continue }
      defer { close(reader.wakeWriter) }
      tested = true
      // A state change now must not write its wake-up byte into the file at that number.
      reader.resume()
      reader.suspend()
      var info = stat()
      #expect(fstat(file, &info) == 0 && info.st_size == 0)
    }
    #expect(tested, "the freed descriptor number was always taken before the test could")
  }
}

/// Polls `condition` every 10 ms for up to five seconds.
private func poll(_ condition: () -> Bool) async -> Bool {
  for _ in 0..<500 {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}
