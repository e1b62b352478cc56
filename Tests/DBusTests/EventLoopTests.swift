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

/// Polls `condition` every 10 ms for up to five seconds.
private func poll(_ condition: () -> Bool) async -> Bool {
  for _ in 0..<500 {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}
