import CDBus
import Dispatch
import Synchronization
import TestSupport
import Testing

// libdbus's main-loop hooks: watch toggles and call timeouts pile up nothing, closing ends every
// watch, and every connection is read on the reactor's one thread.
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

  @Test func connectionsAreReadOnTheReactorsThread() async throws {
    try await withTestBus { bus in
      _ = Reactor.shared
      let before = threadsBlockedInPoll()
      var connections: [DBusConnection] = []
      for _ in 0..<16 { connections.append(try bus.connect()) }
      defer { for connection in connections { connection.close() } }
      // Each answers a call, so each has read from its socket.
      for connection in connections {
        _ = try await connection.call(
          destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
          interface: "org.freedesktop.DBus", member: "GetId")
      }
      // A reading thread per connection would wait in poll(2): 16 more (tests running
      // meanwhile may poll for a moment).
      let during = threadsBlockedInPoll()
      #expect(during - before < 8, "in poll before \(before), with 16 connections \(during)")
    }
  }
}

extension EventLoopTests {
  /// A call made from inside one connection's queue (where an exported method's handler
  /// starts) is handed to the other connection's queue, not waited into: a thread that holds
  /// one queue never waits for another, so handlers of two connections that call each other
  /// cannot wait for each other. Here the other queue is held for half a second meanwhile.
  @Test func aCallFromInsideAnotherConnectionsQueueDoesNotWaitForItsQueue() async throws {
    try await withServerAndClient { _, server, client in
      // 1 while a Dispatch worker holds the client's queue, 2 once it let go.
      let holding = Atomic(0)
      DispatchQueue.global().async {
        try? client.onQueueSync { () throws(DBus.DBusError) in
          holding.store(1, ordering: .releasing)
          usleep(500_000)
        }
        holding.store(2, ordering: .releasing)
      }
      while holding.load(ordering: .acquiring) == 0 { try await Task.sleep(for: .milliseconds(5)) }
      let start = ContinuousClock.now
      let reply = Mutex<Task<[DBusValue], any Error>?>(nil)
      try server.onQueueSync { () throws(DBus.DBusError) in
        // Runs here, inside the server's queue, until the call suspends.
        let task = Task.immediate {
          try await callTest(client, server, "Echo", [.variant(.int32(7))])
        }
        reply.withLock { $0 = task }
      }
      let inside = ContinuousClock.now - start
      #expect(inside < .milliseconds(250), "the server's queue was held \(inside)")
      let task = try #require(reply.withLock { $0 })
      #expect(try await task.value == [.variant(.int32(7))])
      #expect(holding.load(ordering: .acquiring) == 2)
    }
  }
}

extension EventLoopTests {
  /// An exported method's handler starts on the thread that read and dispatched its call, the
  /// reactor's, and a quick one replies from there: no thread is woken to run it.
  @Test func aQuickHandlerRunsOnTheThreadThatReadItsCall() async throws {
    // The reactor's thread, as a watch handler sees it.
    let reactorThread = Mutex<pthread_t?>(nil)
    let (fd, peer) = try seqpacketPair(nonBlocking: true)
    defer {
      close(fd)
      close(peer)
    }
    #expect(
      Reactor.shared.watch(fd) { _ in
        reactorThread.withLock { $0 = pthread_self() }
        Reactor.shared.release(fd)
      })
    var byte: UInt8 = 1
    #expect(write(peer, &byte, 1) == 1)
    while reactorThread.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
    try await withServerAndClient { _, server, client in
      let handlerThreads = Mutex<[pthread_t]>([])
      try server.export(
        ExportedObject(interfaces: [
          ExportedInterface(
            name: "org.blekit.Where",
            methods: [
              ExportedMethod(name: "Here", inSignature: "", outSignature: "") { _ in
                handlerThreads.withLock { $0.append(pthread_self()) }
                return []
              }
            ])
        ]), at: "/where")
      for _ in 0..<20 {
        _ = try await client.call(
          destination: server.uniqueName, path: "/where", interface: "org.blekit.Where",
          member: "Here")
      }
      let threads = handlerThreads.withLock { $0 }
      let reactor = try #require(reactorThread.withLock { $0 })
      #expect(threads.count == 20)
      #expect(
        threads.allSatisfy { $0 == reactor },
        "\(threads.filter { $0 != reactor }.count) of 20 elsewhere")
    }
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
