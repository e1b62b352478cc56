import Testing

// The Dispatch bridge: watch toggles and call timeouts do not pile up sources.
@testable import DBus

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
}
