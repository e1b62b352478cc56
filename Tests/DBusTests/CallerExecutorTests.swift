import TestSupport
import Testing

// A caller that prefers the connection's executor: it resumes on the thread that read its reply
// (the reactor's), in that turn of the connection's queue, and its calls still answer, in
// order, together with other callers, and end when cancelled.
@testable import DBus

@Suite(.timeLimit(.minutes(1))) struct CallerExecutorTests {
  @Test func aCallerResumesOnTheThreadThatReadItsReply() async throws {
    try await withServerAndClient { _, server, client in
      let resumedElsewhere = try await withTaskExecutorPreference(client.executor) {
        var elsewhere = 0
        for index in 0..<200 {
          let reply = try await callTest(client, server, "Echo", [.variant(.int32(Int32(index)))])
          #expect(reply == [.variant(.int32(Int32(index)))])
          if !Reactor.shared.isCurrentThread || !client.isOnQueue { elsewhere += 1 }
        }
        return elsewhere
      }
      #expect(resumedElsewhere == 0, "\(resumedElsewhere) of 200 replies resumed elsewhere")
    }
  }

  @Test func callersOnTheExecutorAndOffItShareTheConnection() async throws {
    try await withServerAndClient { _, server, client in
      let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
        for caller in 0..<4 {
          group.addTask {
            let body: @Sendable () async throws -> Int = {
              var wrong = 0
              for index in 0..<100 {
                let value = Int32(caller * 1000 + index)
                let reply = try await callTest(client, server, "Echo", [.variant(.int32(value))])
                if reply != [.variant(.int32(value))] { wrong += 1 }
              }
              return wrong
            }
            // Two callers prefer the executor, two run on the global pool.
            if caller % 2 == 0 {
              return try await withTaskExecutorPreference(client.executor) { try await body() }
            }
            return try await body()
          }
        }
        return try await group.reduce(0, +)
      }
      #expect(wrong == 0)
    }
  }

  @Test func aCancelledCallOnTheExecutorEnds() async throws {
    try await withServerAndClient { _, server, client in
      let call = Task {
        await withTaskExecutorPreference(client.executor) {
          await callTestResult(client, server, "Sleep", timeout: .seconds(30))
        }
      }
      try await Task.sleep(for: .milliseconds(200))
      call.cancel()
      let start = ContinuousClock.now
      let outcome = await call.value
      #expect(ContinuousClock.now - start < .seconds(5))
      guard case .failure(let error) = outcome else {
        Issue.record("the cancelled call answered: \(outcome)")
        return
      }
      #expect(error.code == .cancelled)
    }
  }
}
