// runCleanup: a call made on the way out of a cancelled task still reaches the peer, and the
// wait is bounded.
import DBus
import Foundation
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1))) struct CleanupTests {
  /// A server whose `Mark` method counts its calls, and a client; `body` gets the count.
  private func withMarkingServer(
    _ body: (DBusConnection, DBusConnection, @Sendable () -> Int) async throws -> Void
  ) async throws {
    try await withTestBus { bus in
      let server = try bus.connect()
      let client = try bus.connect()
      defer {
        client.close()
        server.close()
      }
      let marks = Mutex(0)
      try server.export(
        ExportedObject(interfaces: [
          ExportedInterface(
            name: "org.blekit.Test",
            methods: [
              ExportedMethod(name: "Mark", inSignature: "", outSignature: "") { _ in
                marks.withLock { $0 += 1 }
                return []
              },
              ExportedMethod(name: "Sleep", inSignature: "", outSignature: "") { _ in
                try await Task.sleep(for: .seconds(3600))
                return []
              },
            ])
        ]), at: "/test")
      try await body(server, client) { marks.withLock { $0 } }
    }
  }

  /// The problem: in a cancelled task the call is cancelled before it is sent.
  @Test func callFromACancelledTaskNeverReachesThePeer() async throws {
    try await withMarkingServer { server, client, marks in
      let outcome = await Task {
        withUnsafeCurrentTask { $0?.cancel() }
        return await callTestResult(client, server, "Mark")
      }.value
      guard case .failure(let error) = outcome else {
        Issue.record("the call returned")
        return
      }
      #expect(error.code == .cancelled)
      // A call after it on the same connection: once answered, an earlier one would have been.
      _ = try await callTest(client, server, "Mark")
      #expect(marks() == 1)
    }
  }

  /// The fix: through runCleanup, the same call from a cancelled task reaches the peer.
  @Test func callFromACancelledTaskThroughRunCleanupReachesThePeer() async throws {
    try await withMarkingServer { server, client, marks in
      let (finished, outcome) = await Task {
        withUnsafeCurrentTask { $0?.cancel() }
        let result = Mutex<Result<[DBusValue], DBusError>?>(nil)
        let finished = await runCleanup {
          let outcome = await callTestResult(client, server, "Mark")
          result.withLock { $0 = outcome }
        }
        return (finished, result.withLock { $0 })
      }.value
      #expect(finished)
      guard case .success = outcome else {
        Issue.record("the cleanup call failed: \(String(describing: outcome))")
        return
      }
      #expect(marks() == 1)
    }
  }

  /// Cleanup that hangs is cut off at the limit: runCleanup returns false, and the hanging
  /// call is cancelled.
  @Test func cleanupIsBoundedInTime() async throws {
    try await withMarkingServer { server, client, _ in
      let result = Mutex<Result<[DBusValue], DBusError>?>(nil)
      let start = ContinuousClock.now
      let finished = await Task {
        withUnsafeCurrentTask { $0?.cancel() }
        return await runCleanup(within: .milliseconds(300)) {
          let outcome = await callTestResult(client, server, "Sleep")
          result.withLock { $0 = outcome }
        }
      }.value
      let elapsed = ContinuousClock.now - start
      #expect(!finished)
      #expect(elapsed >= .milliseconds(300))
      #expect(elapsed < .seconds(5))
      // The abandoned call ends as cancelled, soon.
      var waited = Duration.zero
      while result.withLock({ $0 }) == nil && waited < .seconds(5) {
        try await Task.sleep(for: .milliseconds(20))
        waited += .milliseconds(20)
      }
      guard case .failure(let error)? = result.withLock({ $0 }) else {
        Issue.record("the hanging call did not end: \(String(describing: result.withLock { $0 }))")
        return
      }
      #expect(error.code == .cancelled)
    }
  }

  /// Work that finishes returns at once, not after the limit.
  @Test func finishedCleanupDoesNotWaitForTheLimit() async {
    let start = ContinuousClock.now
    let finished = await runCleanup(within: .seconds(30)) {}
    #expect(finished)
    #expect(ContinuousClock.now - start < .seconds(5))
  }
}
