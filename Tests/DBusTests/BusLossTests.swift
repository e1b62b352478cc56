// The bus daemon going away (killed, or restarted): every signal stream and handler hears of
// it at once with `.disconnected`, pending and later calls fail, and closing the connection
// ourselves still ends streams normally.
import DBus
import TestSupport
import Testing

/// How an iteration of a signal stream ended.
private enum StreamEnd: Sendable, Equatable {
  case finished
  case failed(DBusError.Code)
}

/// Iterates `stream` to its end and says how it ended.
private func end<S: AsyncSequence & Sendable>(of stream: S) async -> StreamEnd
where S.Failure == DBusError {
  do throws(DBusError) {
    var iterator = stream.makeAsyncIterator()
    while try await iterator.next(isolation: nil) != nil {}
    return .finished
  } catch {
    return .failed(error.code)
  }
}

@Suite(.timeLimit(.minutes(1))) struct BusLossTests {
  @Test func signalStreamsEndWithDisconnectedWhenTheBusDies() async throws {
    let bus = try TestBus()
    defer { bus.stop() }
    let client = try bus.connect()
    defer { client.close() }
    let signals = try await client.signals(MatchRule(interface: "org.blekit.Test"))
    let owners = try await client.nameOwnerChanges("org.blekit.Someone")
    let waiting = Task { await (end(of: signals), end(of: owners)) }
    try await Task.sleep(for: .milliseconds(100))
    bus.stop()
    let ends = await within(.seconds(5), waiting)
    #expect(ends.value?.0 == .failed(.disconnected))
    #expect(ends.value?.1 == .failed(.disconnected))
    #expect(client.isClosed)
  }

  @Test func signalHandlersHearTheLossOnce() async throws {
    let bus = try TestBus()
    defer { bus.stop() }
    let client = try bus.connect()
    defer { client.close() }
    let (ends, endings) = AsyncStream.makeStream(of: DBusError?.self)
    let subscription = try await client.handleSignals(
      MatchRule(interface: "org.blekit.Test"), { _ in }, onEnd: { endings.yield($0) })
    let reading = try await client.handleSignals(
      MatchRule(interface: "org.blekit.Other"), reading: { _, _ in },
      onEnd: { endings.yield($0) })
    bus.stop()
    let heard = await within(.seconds(5)) { () -> [DBusError.Code?] in
      var codes: [DBusError.Code?] = []
      for await error in ends {
        codes.append(error?.code)
        if codes.count == 2 { break }
      }
      return codes
    }
    #expect(heard.value == [.disconnected, .disconnected])
    subscription.cancel()  // after the loss: nothing more is heard
    reading.cancel()
    endings.finish()
    var more = 0
    for await _ in ends { more += 1 }
    #expect(more == 0)
  }

  @Test func pendingAndLaterCallsFailAtOnce() async throws {
    let bus = try TestBus()
    defer { bus.stop() }
    let client = try bus.connect()
    defer { client.close() }
    let server = try bus.connect()
    defer { server.close() }
    try server.export(echoObject(), at: "/test")
    let calls = (0..<3).map { _ in
      Task { await callTestResult(client, server, "Sleep", timeout: .seconds(60)) }
    }
    try await Task.sleep(for: .milliseconds(100))
    let start = ContinuousClock.now
    bus.stop()
    for call in calls {
      let result = await within(.seconds(5), call)
      guard case .finished(.failure(let error)) = result else {
        Issue.record("a pending call survived the bus: \(result)")
        continue
      }
      #expect(error.code == .disconnected)
    }
    #expect(ContinuousClock.now - start < .seconds(5))
    await #expect(throws: DBusError.self) {
      _ = try await client.nameOwner("org.blekit.Anyone")
    }
  }

  @Test func closingEndsStreamsNormally() async throws {
    try await withTestBus { bus in
      let client = try bus.connect()
      let signals = try await client.signals(MatchRule(interface: "org.blekit.Test"))
      let (ends, endings) = AsyncStream.makeStream(of: DBusError?.self)
      let subscription = try await client.handleSignals(
        MatchRule(interface: "org.blekit.Test"), { _ in }, onEnd: { endings.yield($0) })
      client.close()
      let streamEnd = await within(.seconds(5)) { await end(of: signals) }
      #expect(streamEnd.value == .finished)
      var iterator = ends.makeAsyncIterator()
      let handlerEnd = await iterator.next()
      #expect(handlerEnd != nil && handlerEnd! == nil)
      _ = subscription
    }
  }
}
