// Validated names: invalid object paths, bus names, interfaces, members, error names and
// signatures are refused before anything is sent.
import DBus
import Testing

@Suite struct NameValidationTests {
  @Test func objectPaths() throws {
    #expect(ObjectPath(rawValue: "/org/bluez/hci0") != nil)
    for bad in ["", "org", "/org/", "//", "/a-b", "/a//b", "/a\0b"] {
      #expect(ObjectPath(rawValue: bad) == nil, "\(bad)")
      let error = #expect(throws: DBusError.self) { try ObjectPath(bad) }
      #expect(error?.code == .invalidArgument)
    }
    let device: ObjectPath = "/org/bluez/hci0/dev_AA_BB"
    #expect(device.parent == "/org/bluez/hci0")
    #expect(ObjectPath.root.parent == nil)
    #expect(ObjectPath("/org").parent == .root)
    #expect(device.isDescendant(of: "/org/bluez"))
    #expect(device.isDescendant(of: .root))
    #expect(!device.isDescendant(of: device))
    #expect(!ObjectPath("/org/bluez2").isDescendant(of: "/org/bluez"))
    #expect(ObjectPath.root.appending("org") == "/org")
    #expect(device.appending("service0001") == "/org/bluez/hci0/dev_AA_BB/service0001")
    #expect(throws: DBusError.self) { try device.appending(checked: "a-b") }
    #expect(throws: DBusError.self) { try device.appending(checked: "a/b") }
  }

  @Test func otherNames() {
    #expect(BusName(rawValue: "org.bluez") != nil)
    #expect(BusName(rawValue: ":1.42") != nil)
    #expect(BusName(rawValue: "org") == nil)
    #expect(BusName(rawValue: "org..bluez") == nil)
    #expect(InterfaceName(rawValue: "org.bluez.Device1") != nil)
    #expect(InterfaceName(rawValue: "Device1") == nil)
    #expect(InterfaceName(rawValue: "org.bluez.1Device") == nil)
    #expect(MemberName(rawValue: "Connect") != nil)
    #expect(MemberName(rawValue: "Con.nect") == nil)
    #expect(MemberName(rawValue: "") == nil)
    #expect(ErrorName(rawValue: "org.bluez.Error.Failed") != nil)
    #expect(ErrorName(rawValue: "Failed") == nil)
    #expect(Signature(rawValue: "a{sv}") != nil)
    #expect(Signature(rawValue: "a{vs}") == nil)
    #expect(Signature(rawValue: "(") == nil)
    #expect(Signature(rawValue: "sa{sv}")?.isSingleCompleteType == false)
    #expect(Signature(rawValue: "sa{sv}")?.completeTypes == ["s", "a{sv}"])
    #expect(throws: DBusError.self) { try Signature(singleCompleteType: "ss") }
  }

  @Test func badInputIsRefusedBeforeSending() async throws {
    try await withServerAndClient { _, server, client in
      // Names given as strings are validated before a message exists.
      let text = "/not valid"
      let path = #expect(throws: DBusError.self) { try ObjectPath(text) }
      #expect(path?.message.contains("object path") == true)
      // A value that doesn't match a container's declared type never reaches libdbus.
      let error = await #expect(throws: DBusError.self) {
        try await client.call(
          destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
          member: "Echo", arguments: [.variant(.array(element: "y", [.string("x")]))])
      }
      #expect(error?.code == .invalidArgument)
      // The connection is still fine.
      let check1 = try await callTest(client, server, "Echo", [.variant("ok")])
      #expect(check1 == [.variant("ok")])
    }
  }
}
