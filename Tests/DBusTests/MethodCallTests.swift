// Method calls between two connections on a private bus: echo, errors, timeouts, cancellation,
// a peer that vanishes mid-call.
import DBus
import Foundation
import Testing

/// The test object: Echo (returns its variant), WhoAmI (the caller's unique name), Fail (an
/// error reply), FailPlain (a non-D-Bus error), Sleep (never answers before being cancelled),
/// PipeWrite (writes a text to the fd it is given).
func echoObject() -> ExportedObject {
  ExportedObject(interfaces: [
    ExportedInterface(
      name: "org.blekit.Test",
      methods: [
        ExportedMethod(name: "Echo", inSignature: "v", outSignature: "v") { $0.arguments },
        ExportedMethod(name: "WhoAmI", inSignature: "", outSignature: "s") {
          [.string($0.sender.rawValue)]
        },
        ExportedMethod(name: "Fail", inSignature: "", outSignature: "") { _ in
          throw DBusError.remote(name: "org.bluez.Error.InProgress", message: "busy right now")
        },
        ExportedMethod(name: "FailPlain", inSignature: "", outSignature: "") { _ in
          throw CocoaError(.fileNoSuchFile)
        },
        ExportedMethod(name: "Sleep", inSignature: "", outSignature: "") { _ in
          try await Task.sleep(for: .seconds(3600))
          return []
        },
        ExportedMethod(name: "WrongReply", inSignature: "", outSignature: "s") { _ in
          [.int32(1)]
        },
        ExportedMethod(name: "PipeWrite", inSignature: "hs", outSignature: "") { call in
          guard let fd = call.arguments[0].fileDescriptorValue,
            let text = call.arguments[1].stringValue
          else { throw DBusError.remote(name: "org.blekit.Error.Bad", message: "bad args") }
          let bytes = Array(text.utf8)
          let written = bytes.withUnsafeBytes { write(fd.rawValue, $0.baseAddress, $0.count) }
          guard written == bytes.count else {
            throw DBusError.remote(name: "org.blekit.Error.Write", message: "short write")
          }
          return []
        },
      ])
  ])
}

@Suite struct MethodCallTests {
  @Test func echoAndCallerName() async throws {
    try await withServerAndClient { _, server, client in
      let reply = try await callTest(client, server, "Echo", [.variant(.string("hello"))])
      #expect(reply == [.variant(.string("hello"))])
      let who = try await callTest(client, server, "WhoAmI")
      #expect(who == [.string(client.uniqueName.rawValue)])
    }
  }

  @Test func errorReplyCarriesNameAndMessage() async throws {
    try await withServerAndClient { _, server, client in
      let error = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "Fail")
      }
      #expect(error?.code == .remote)
      #expect(error?.name == "org.bluez.Error.InProgress")
      #expect(error?.message == "busy right now")
      #expect(error?.description == "org.bluez.Error.InProgress: busy right now")

      let plain = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "FailPlain")
      }
      #expect(plain?.name == "org.freedesktop.DBus.Error.Failed")
    }
  }

  @Test func unknownMethodAndBadArgumentsAreRefused() async throws {
    try await withServerAndClient { _, server, client in
      let unknown = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "NoSuchMethod")
      }
      #expect(unknown?.name == "org.freedesktop.DBus.Error.UnknownMethod")
      let badArgs = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "Echo", [.int32(1)])
      }
      #expect(badArgs?.name == "org.freedesktop.DBus.Error.InvalidArgs")
      let wrongReply = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "WrongReply")
      }
      #expect(wrongReply?.name == "org.freedesktop.DBus.Error.Failed")
      // The server names the call it could not answer.
      #expect(
        wrongReply?.message.hasPrefix("org.blekit.Test.WrongReply on /test produced a bad reply")
          == true)
    }
  }

  @Test func callTimesOut() async throws {
    try await withServerAndClient { _, server, client in
      let error = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "Sleep", timeout: .milliseconds(200))
      }
      #expect(error?.code == .timeout)
      #expect(error?.message == "timed out after 200 ms calling org.blekit.Test.Sleep on /test")
      // A prepared message is named from its header, unless the caller names it.
      let message = try DBusMessage.methodCall(
        destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
        member: "Sleep")
      let unnamed = await #expect(throws: DBusError.self) {
        try await client.call(message, timeout: .milliseconds(100))
      }
      #expect(unnamed?.message == "timed out after 100 ms calling org.blekit.Test.Sleep on /test")
      let named = await #expect(throws: DBusError.self) {
        try await client.call(
          try DBusMessage.methodCall(
            destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
            member: "Sleep"), timeout: .milliseconds(100), what: "the test's nap")
      }
      #expect(named?.message == "timed out after 100 ms calling the test's nap")
      // The connection still works afterwards.
      let check1 = try await callTest(client, server, "Echo", [.variant(.byte(7))])
      #expect(check1 == [.variant(.byte(7))])
    }
  }

  @Test func aMethodsChangedOutSignatureChecksItsReplies() async throws {
    try await withServerAndClient { _, server, client in
      var method = ExportedMethod(name: "Count", inSignature: "", outSignature: "s") { _ in
        [.int32(5)]
      }
      method.outSignature = "i"
      try server.export(
        ExportedObject(interfaces: [ExportedInterface(name: "org.blekit.Count", methods: [method])]
        ),
        at: "/count")
      let reply = try await client.call(
        destination: server.uniqueName, path: "/count", interface: "org.blekit.Count",
        member: "Count")
      #expect(reply == [.int32(5)])
    }
  }

  @Test func cancellationCancelsThePendingCall() async throws {
    try await withServerAndClient { _, server, client in
      let task = Task {
        await callTestResult(client, server, "Sleep")
      }
      try await Task.sleep(for: .milliseconds(100))
      task.cancel()
      guard case .failure(let error) = await task.value else {
        Issue.record("cancelled call returned")
        return
      }
      #expect(error.code == .cancelled)
      let check2 = try await callTest(client, server, "Echo", [.variant(.byte(1))])
      #expect(check2 == [.variant(.byte(1))])
    }
  }

  @Test func alreadyCancelledTaskDoesNotCall() async throws {
    try await withServerAndClient { _, server, client in
      let task = Task {
        withUnsafeCurrentTask { $0?.cancel() }
        return await callTestResult(client, server, "Sleep")
      }
      guard case .failure(let error) = await task.value else {
        Issue.record("cancelled call returned")
        return
      }
      #expect(error.code == .cancelled)
    }
  }

  @Test func peerDisconnectingMidCallIsAnError() async throws {
    try await withTestBus { bus in
      let server = try bus.connect()
      let client = try bus.connect()
      defer { client.close() }
      let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
      try server.export(
        ExportedObject(interfaces: [
          ExportedInterface(
            name: "org.blekit.Test",
            methods: [
              ExportedMethod(name: "Hang", inSignature: "", outSignature: "") { _ in
                startedContinuation.yield()
                try await Task.sleep(for: .seconds(3600))
                return []
              }
            ])
        ]), at: "/test")
      let call = Task { await callTestResult(client, server, "Hang") }
      // Wait until the server is inside the handler, then drop the server's connection.
      for await _ in started { break }
      server.close()
      guard case .failure(let error) = await call.value else {
        Issue.record("call to a vanished peer returned")
        return
      }
      #expect(error.code == .noReply)
      #expect(error.name == "org.freedesktop.DBus.Error.NoReply")
    }
  }

  @Test func closedConnectionFailsCalls() async throws {
    try await withServerAndClient { _, server, client in
      let pending = Task {
        await callTestResult(client, server, "Sleep")
      }
      try await Task.sleep(for: .milliseconds(100))
      client.close()
      client.close()  // idempotent
      guard case .failure(let error) = await pending.value else {
        Issue.record("pending call survived close")
        return
      }
      #expect(error.code == .disconnected)
      let after = await #expect(throws: DBusError.self) {
        try await callTest(client, server, "Echo", [.variant(.byte(1))])
      }
      #expect(after?.code == .disconnected)
    }
  }

  @Test func busDaemonGoingAwayFailsCalls() async throws {
    let bus = try TestBus()
    let client = try bus.connect()
    defer { client.close() }
    let server = try bus.connect()
    defer { server.close() }
    try server.export(echoObject(), at: "/test")
    let pending = Task {
      await callTestResult(client, server, "Sleep")
    }
    try await Task.sleep(for: .milliseconds(100))
    bus.stop()
    guard case .failure(let error) = await pending.value else {
      Issue.record("call survived the bus")
      return
    }
    #expect(error.code == .disconnected)
  }

  @Test func fileDescriptorThroughAMethodCall() async throws {
    try await withServerAndClient { _, server, client in
      #expect(client.canSendFileDescriptors)
      var fds: [Int32] = [0, 0]
      #expect(pipe(&fds) == 0)
      let readEnd = FileDescriptor(owning: fds[0])
      let writeEnd = FileDescriptor(owning: fds[1])
      _ = try await callTest(
        client, server, "PipeWrite", [.unixFD(writeEnd), .string("through the bus")])
      _ = writeEnd.take().map { close($0) }  // our copy of the write end; the server's dup is gone
      var buffer = [UInt8](repeating: 0, count: 64)
      let count = buffer.withUnsafeMutableBytes { read(readEnd.rawValue, $0.baseAddress, $0.count) }
      #expect(count > 0)
      #expect(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self) == "through the bus")
    }
  }

  @Test func receivedFileDescriptorIsUsable() async throws {
    try await withServerAndClient { _, server, client in
      var fds: [Int32] = [0, 0]
      #expect(pipe(&fds) == 0)
      let readEnd = FileDescriptor(owning: fds[0])
      let writeEnd = FileDescriptor(owning: fds[1])
      // Echo returns a duplicate of our read end, received as a new fd.
      let reply = try await callTest(client, server, "Echo", [.variant(.unixFD(readEnd))])
      let received = try #require(reply.first?.fileDescriptorValue)
      #expect(received.rawValue >= 0)
      #expect(received.rawValue != readEnd.rawValue)
      _ = "ping".withCString { write(writeEnd.rawValue, $0, 4) }
      var buffer = [UInt8](repeating: 0, count: 8)
      let count = buffer.withUnsafeMutableBytes {
        read(received.rawValue, $0.baseAddress, $0.count)
      }
      #expect(count == 4)
      #expect(Array(buffer.prefix(4)) == Array("ping".utf8))
      let taken = try #require(received.take())
      #expect(received.take() == nil)
      #expect(received.rawValue == -1)
      close(taken)
    }
  }
}
