// An exported object tree driven by an independent client (dbus-send) and by our own client:
// methods, Properties, ObjectManager, Introspect (parsed as XML), caller identity.
import DBus
import Foundation
import Synchronization
import Testing

/// A small GATT-like tree: an object manager at /app, a service and a characteristic below.
final class TreeState: Sendable {
  let value = Mutex<[UInt8]>([1, 2])
  let lastWriter = Mutex<BusName?>(nil)
  let allowed: BusName
  init(allowed: BusName) { self.allowed = allowed }

  var service: ExportedObject {
    ExportedObject(interfaces: [
      ExportedInterface(
        name: "org.blekit.Service",
        methods: [
          ExportedMethod(
            name: "Describe", inSignature: "s", outSignature: "s", inArgumentNames: ["prefix"],
            outArgumentNames: ["text"]
          ) { call in [.string((call.arguments[0].stringValue ?? "") + "heart rate")] }
        ],
        properties: [
          ExportedProperty(name: "UUID", signature: "s", access: .read) { .string("180d") },
          ExportedProperty(name: "Primary", signature: "b", access: .read) { .bool(true) },
          ExportedProperty(name: "Absent", signature: "s", access: .read) { nil },
        ],
        signals: [ExportedSignal(name: "Changed", signature: "sv")])
    ])
  }

  var characteristic: ExportedObject {
    ExportedObject(interfaces: [
      ExportedInterface(
        name: "org.blekit.Characteristic",
        methods: [
          ExportedMethod(name: "Secret", inSignature: "", outSignature: "s") { [allowed] call in
            guard call.sender == allowed else {
              throw DBusError.remote(name: "org.bluez.Error.NotAuthorized", message: "not you")
            }
            return ["the secret"]
          }
        ],
        properties: [
          ExportedProperty(
            name: "Value", signature: "ay", access: .readWrite,
            get: { [self] in .bytes(self.value.withLock { $0 }) },
            set: { [self] newValue, sender in
              guard let bytes = newValue.bytesValue else { return }
              self.value.withLock { $0 = bytes }
              self.lastWriter.withLock { $0 = sender }
            })
        ])
    ])
  }
}

/// Extracts a summary of an introspection document with python3's XML parser (fails on bad XML).
func parseIntrospection(_ xml: String) async throws -> String {
  let script = """
    import sys, xml.etree.ElementTree as ET
    root = ET.fromstring(sys.stdin.read())
    out = []
    for i in root.findall('interface'):
        out.append('I ' + i.get('name'))
        for m in i.findall('method'):
            out.append('M ' + m.get('name') + ' ' + ','.join(a.get('type') + ':' + a.get('direction', '') + ':' + a.get('name') for a in m.findall('arg')))
        for p in i.findall('property'):
            out.append('P ' + p.get('name') + ' ' + p.get('type') + ' ' + p.get('access'))
        for s in i.findall('signal'):
            out.append('S ' + s.get('name') + ' ' + ','.join(a.get('type') for a in s.findall('arg')))
    for n in root.findall('node'):
        out.append('N ' + n.get('name'))
    print('\\n'.join(out))
    """
  let result = try await runAsync("/usr/bin/env", ["python3", "-c", script], input: xml)
  guard result.status == 0 else { throw DBusError(code: .unexpectedReply, message: result.error) }
  return result.output
}

@Suite struct ExportedObjectTests {
  @Test func treeDrivenByDbusSend() async throws {
    try await withServerAndClient { bus, server, client in
      let state = TreeState(allowed: client.uniqueName)
      try server.addObjectManager(at: "/app")
      try server.export(state.service, at: "/app/service0")
      try server.export(state.characteristic, at: "/app/service0/char0")
      let dest = "--dest=\(server.uniqueName)"

      let described = try await dbusSend(
        bus, [dest, "/app/service0", "org.blekit.Service.Describe", "string:my "])
      #expect(described.contains("string \"my heart rate\""))

      let uuid = try await dbusSend(
        bus,
        [
          dest, "/app/service0", "org.freedesktop.DBus.Properties.Get",
          "string:org.blekit.Service", "string:UUID",
        ])
      #expect(uuid.contains("variant") && uuid.contains("string \"180d\""))

      let all = try await dbusSend(
        bus,
        [
          dest, "/app/service0", "org.freedesktop.DBus.Properties.GetAll",
          "string:org.blekit.Service",
        ])
      #expect(
        all.contains("\"UUID\"") && all.contains("\"Primary\"") && all.contains("boolean true"))
      #expect(!all.contains("Absent"))

      let managed = try await dbusSend(
        bus, [dest, "/app", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
      #expect(managed.contains("object path \"/app/service0\""))
      #expect(managed.contains("object path \"/app/service0/char0\""))
      #expect(managed.contains("\"org.blekit.Characteristic\""))
      #expect(managed.contains("\"180d\""))

      let introspected = try await dbusSend(
        bus, [dest, "/app/service0", "org.freedesktop.DBus.Introspectable.Introspect"])
      #expect(introspected.contains("<node name=\"char0\"/>"))

      let secret = try await runAsync(
        "/usr/bin/dbus-send",
        [
          "--bus=\(bus.address)", "--print-reply", dest, "/app/service0/char0",
          "org.blekit.Characteristic.Secret",
        ])
      #expect(secret.status != 0)
      #expect(secret.error.contains("org.bluez.Error.NotAuthorized"))
      // Our client is the allowed caller.
      let allowed = try await client.call(
        destination: server.uniqueName, path: "/app/service0/char0",
        interface: "org.blekit.Characteristic", member: "Secret")
      #expect(allowed == ["the secret"])
    }
  }

  @Test func introspectionIsValidXML() async throws {
    try await withServerAndClient { _, server, client in
      let state = TreeState(allowed: client.uniqueName)
      try server.addObjectManager(at: "/app")
      try server.export(state.service, at: "/app/service0")
      try server.export(state.characteristic, at: "/app/service0/char0")
      func introspect(_ path: ObjectPath) async throws -> String {
        let reply = try await client.call(
          destination: server.uniqueName, path: path, interface: .introspectable,
          member: "Introspect")
        return try await parseIntrospection(try #require(reply.first?.stringValue))
      }
      let service = try await introspect("/app/service0")
      #expect(service.contains("I org.blekit.Service"))
      #expect(service.contains("M Describe s:in:prefix,s:out:text"))
      #expect(service.contains("P UUID s read"))
      #expect(service.contains("S Changed s,v"))
      #expect(service.contains("I org.freedesktop.DBus.Properties"))
      #expect(service.contains("N char0"))
      let characteristic = try await introspect("/app/service0/char0")
      #expect(characteristic.contains("P Value ay readwrite"))
      #expect(!characteristic.contains("N "))
      let app = try await introspect("/app")
      #expect(app.contains("I org.freedesktop.DBus.ObjectManager"))
      #expect(app.contains("N service0"))
      let root = try await introspect("/")
      #expect(root.contains("N app"))
      #expect(root.contains("N test"))
    }
  }

  @Test func propertiesSetSeesCallerAndChangesAreSignalled() async throws {
    try await withServerAndClient { _, server, client in
      let state = TreeState(allowed: client.uniqueName)
      try server.export(state.characteristic, at: "/char")
      _ = try await client.call(
        destination: server.uniqueName, path: "/char", interface: .properties, member: "Set",
        arguments: ["org.blekit.Characteristic", "Value", .variant(.bytes([9, 9]))])
      #expect(state.value.withLock { $0 } == [9, 9])
      #expect(state.lastWriter.withLock { $0 } == client.uniqueName)
      let got = try await client.call(
        destination: server.uniqueName, path: "/char", interface: .properties, member: "Get",
        arguments: ["org.blekit.Characteristic", "Value"])
      #expect(got == [.variant(.bytes([9, 9]))])
      let wrongType = await #expect(throws: DBusError.self) {
        try await client.call(
          destination: server.uniqueName, path: "/char", interface: .properties, member: "Set",
          arguments: ["org.blekit.Characteristic", "Value", .variant(.string("no"))])
      }
      #expect(wrongType?.name == "org.freedesktop.DBus.Error.InvalidArgs")
      let unknown = await #expect(throws: DBusError.self) {
        try await client.call(
          destination: server.uniqueName, path: "/char", interface: .properties, member: "Get",
          arguments: ["org.blekit.Characteristic", "Nope"])
      }
      #expect(unknown?.name == "org.freedesktop.DBus.Error.UnknownProperty")

      let changes = try await client.signals(
        MatchRule(sender: server.uniqueName, path: "/char", interface: .properties))
      try server.emitPropertiesChanged(
        path: "/char", interface: "org.blekit.Characteristic", changed: ["Value": .bytes([1])],
        invalidated: ["Other"])
      for try await signal in changes {
        #expect(signal.member == "PropertiesChanged")
        #expect(signal.arguments.first == "org.blekit.Characteristic")
        #expect(signal.arguments[1].stringVariantDictionary?["Value"]?.bytesValue == [1])
        #expect(signal.arguments[2].stringArrayValue == ["Other"])
        break
      }
    }
  }

  @Test func objectManagerSignalsAddedAndRemoved() async throws {
    try await withServerAndClient { _, server, client in
      let state = TreeState(allowed: client.uniqueName)
      try server.addObjectManager(at: "/app")
      let signals = try await client.signals(
        MatchRule(sender: server.uniqueName, interface: .objectManager))
      try server.export(state.service, at: "/app/service0")
      #expect(throws: DBusError.self) { try server.export(state.service, at: "/app/service0") }
      server.unexport("/app/service0")
      var seen: [Signal] = []
      for try await signal in signals {
        seen.append(signal)
        if seen.count == 2 { break }
      }
      #expect(seen.map(\.member) == ["InterfacesAdded", "InterfacesRemoved"])
      #expect(seen.map(\.path) == ["/app", "/app"])
      #expect(seen[0].arguments.first == .objectPath("/app/service0"))
      let interfaces = seen[0].arguments[1].dictionaryValue ?? []
      #expect(interfaces.first?.key == "org.blekit.Service")
      #expect(interfaces.first?.value.stringVariantDictionary?["UUID"] == "180d")
      #expect(seen[1].arguments[1].stringArrayValue == ["org.blekit.Service"])
      let managed = try await client.call(
        destination: server.uniqueName, path: "/app", interface: .objectManager,
        member: "GetManagedObjects")
      #expect(managed == [.dictionary(key: "o", value: "a{sa{sv}}", [])])
    }
  }

  @Test func anAdmissionRuleGuardsEveryCallBeforeDecoding() async throws {
    try await withTestBus { bus in
      let server = try bus.connect()
      let allowed = try bus.connect()
      let stranger = try bus.connect()
      defer { for connection in [server, allowed, stranger] { connection.close() } }
      let state = TreeState(allowed: allowed.uniqueName)
      let admit: @Sendable (BusName) throws(DBusError) -> Void = {
        [name = allowed.uniqueName] sender throws(DBusError) in
        guard sender == name else {
          throw DBusError.remote(name: "org.bluez.Error.NotAuthorized", message: "not you")
        }
      }
      var characteristic = state.characteristic
      characteristic.admit = admit
      try server.export(characteristic, at: "/app/char")
      try server.addObjectManager(at: "/app", admit: admit)
      // The stranger gets nothing: Get, GetAll, Set, Introspect (of the object and of the
      // path above it), GetManagedObjects, a method.
      let calls: [(ObjectPath, InterfaceName, MemberName, [DBusValue])] = [
        ("/app/char", .properties, "Get", ["org.blekit.Characteristic", "Value"]),
        ("/app/char", .properties, "GetAll", ["org.blekit.Characteristic"]),
        (
          "/app/char", .properties, "Set",
          ["org.blekit.Characteristic", "Value", .variant(.bytes([7]))]
        ),
        ("/app/char", .introspectable, "Introspect", []),
        ("/app", .introspectable, "Introspect", []),
        ("/app", .objectManager, "GetManagedObjects", []),
        ("/app/char", "org.blekit.Characteristic", "Secret", []),
      ]
      for (path, interface, member, arguments) in calls {
        let refused = await #expect(throws: DBusError.self) {
          try await stranger.call(
            destination: server.uniqueName, path: path, interface: interface, member: member,
            arguments: arguments)
        }
        #expect(refused?.name == "org.bluez.Error.NotAuthorized", "\(member) on \(path)")
      }
      #expect(state.value.withLock { $0 } == [1, 2])
      // The admitted caller gets every answer.
      for (path, interface, member, arguments) in calls {
        _ = try await allowed.call(
          destination: server.uniqueName, path: path, interface: interface, member: member,
          arguments: arguments)
      }
      #expect(state.value.withLock { $0 } == [7])
    }
  }

  @Test func pingIsAnswered() async throws {
    try await withServerAndClient { _, server, client in
      let reply = try await client.call(
        destination: server.uniqueName, path: "/test", interface: .peer, member: "Ping")
      #expect(reply.isEmpty)
    }
  }
}
