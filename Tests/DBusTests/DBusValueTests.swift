// Values both ways: every basic type, arrays (empty too), dictionaries with integer and object
// path keys, nested variants, structs, large byte arrays; through a message and through a bus.
import DBus
import Testing

let sampleValues: [DBusValue] = [
  .byte(0), .byte(255), .bool(true), .bool(false),
  .int16(-32768), .uint16(65535), .int32(-2_147_483_648), .uint32(4_294_967_295),
  .int64(.min), .uint64(.max), .double(-1.5), .double(.infinity),
  .string(""), .string("héllo ✓ wörld"), .objectPath("/org/bluez/hci0"), .objectPath("/"),
  .signature("a{sv}"), .signature(""),
  .bytes([]), .bytes([1, 2, 3, 0, 255]),
  .array(element: "s", []), .strings(["a", "b", "c"]),
  .array(element: "i", [.int32(1), .int32(-2)]),
  .array(element: "ay", [.bytes([1]), .bytes([])]),
  .array(element: "(yb)", [.structure([.byte(1), .bool(true)])]),
  .dictionary(
    key: "q", value: "v",
    [
      DBusDictEntry(key: .uint16(0x004C), value: .variant(.bytes([0x02, 0x15]))),
      DBusDictEntry(key: .uint16(6), value: .variant(.bytes([]))),
    ]),
  .dictionary(
    key: "o", value: "a{sa{sv}}",
    [
      DBusDictEntry(
        key: .objectPath("/org/bluez/hci0/dev_AA"),
        value: .dictionary(
          key: "s", value: "a{sv}",
          [
            DBusDictEntry(
              key: "org.bluez.Device1", value: .dictionaryOfVariants(["RSSI": .int16(-60)]))
          ]))
    ]),
  .dictionary(key: "s", value: "v", []),
  .dictionary(key: "x", value: "s", [DBusDictEntry(key: .int64(-1), value: "minus one")]),
  .structure([.string("a"), .int32(1), .variant(.variant(.variant(.uint64(9))))]),
  .variant(.array(element: "v", [.variant(.string("x")), .variant(.int16(2))])),
  .variant(.dictionary(key: "s", value: "v", [])),
  .dictionaryOfVariants(["b": .bool(true), "a": .strings([]), "c": .structure([.byte(1)])]),
]

@Suite struct DBusValueTests {
  @Test(arguments: sampleValues)
  func roundTripThroughAMessage(_ value: DBusValue) throws {
    let message = try DBusMessage.signal(path: "/a", interface: "org.blekit.T", member: "M")
    try message.append([value, .int32(42)])
    #expect(message.signature.rawValue == value.signature.rawValue + "i")
    #expect(try message.arguments() == [value, .int32(42)])
    // And through the wire form.
    let rebuilt = try DBusMessage(wireBytes: message.wireBytes())
    #expect(try rebuilt.arguments() == [value, .int32(42)])
  }

  @Test func everyValueRoundTripsThroughTheBus() async throws {
    try await withServerAndClient { _, server, client in
      for value in sampleValues {
        let reply = try await callTest(client, server, "Echo", [.variant(value)])
        #expect(reply == [.variant(value)], "\(value.signature)")
      }
    }
  }

  @Test func oneMebibyteOfBytes() async throws {
    let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    try await withServerAndClient { _, server, client in
      let reply = try await callTest(client, server, "Echo", [.variant(.bytes(big))])
      #expect(reply.first?.bytesValue == big)
    }
  }

  @Test func accessorsLookThroughVariants() {
    let value = DBusValue.variant(.variant(.int16(-3)))
    #expect(value.int16Value == -3)
    #expect(value.int32Value == nil)
    #expect(DBusValue.strings(["x"]).stringArrayValue == ["x"])
    let dict = DBusValue.dictionaryOfVariants(["Name": "hci0", "Powered": true])
    #expect(dict.signature == "a{sv}")
    #expect(dict.stringVariantDictionary?["Powered"]?.boolValue == true)
    #expect(dict.stringVariantDictionary?["Name"]?.stringValue == "hci0")
    // Sorted by key.
    #expect(dict.dictionaryValue?.map(\.key) == ["Name", "Powered"])
  }

  @Test func mismatchedValuesAreRefusedBeforeSending() throws {
    let message = try DBusMessage.signal(path: "/a", interface: "org.blekit.T", member: "M")
    #expect(throws: DBusError.self) {
      try message.append([.array(element: "s", [.int32(1)])])
    }
    #expect(throws: DBusError.self) {
      try message.append([.string("nul\0inside")])
    }
    let other = try DBusMessage.signal(path: "/a", interface: "org.blekit.T", member: "M")
    let error = #expect(throws: DBusError.self) {
      try other.append([.int32(1)], signature: "s")
    }
    #expect(error?.code == .invalidArgument)
    #expect(throws: DBusError.self) {
      try other.append([.dictionary(key: "a{sv}", value: "s", [])])
    }
    #expect(throws: DBusError.self) {
      try other.append([.structure([])])
    }
  }
}
