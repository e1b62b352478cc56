// Method calls between two connections on a private bus: echo, errors, timeouts, cancellation.
import DBus
import Testing

/// An object with an Echo method (returns its arguments) and a Fail method.
func echoObject() -> ExportedObject {
  ExportedObject(interfaces: [
    ExportedInterface(
      name: "org.blekit.Test",
      methods: [
        ExportedMethod(name: "Echo", inSignature: "v", outSignature: "v") { $0.arguments },
        ExportedMethod(name: "WhoAmI", inSignature: "", outSignature: "s") {
          [.string($0.sender.rawValue)]
        },
      ])
  ])
}

@Suite struct MethodCallTests {
  @Test func echoRoundTrip() async throws {
    try await withTestBus { bus in
      let server = try bus.connect()
      let client = try bus.connect()
      defer {
        server.close()
        client.close()
      }
      try server.export(echoObject(), at: "/test")
      let reply = try await client.call(
        destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
        member: "Echo", arguments: [.variant(.string("hello"))])
      #expect(reply == [.variant(.string("hello"))])
      let who = try await client.call(
        destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
        member: "WhoAmI")
      #expect(who == [.string(client.uniqueName.rawValue)])
    }
  }
}
