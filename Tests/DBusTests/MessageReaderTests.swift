// MessageReader: arguments read one by one agree with the whole-body decoding, mismatches
// throw, and handleSignals(_:reading:) hands each signal's reader to its handler.
import DBus
import Synchronization
import Testing

@Suite struct MessageReaderTests {
  /// Device properties as bluetoothd sends them, with a nested variant and containers.
  static let properties: [String: DBusValue] = [
    "Address": .string("00:AA:01:01:00:01"), "RSSI": .int16(-60), "Connected": .bool(false),
    "Adapter": .objectPath("/org/bluez/hci0"),
    "UUIDs": .strings(["e20a39f4-73f5-4bc4-a12f-17d1ad07a961"]),
    "ManufacturerData": .dictionary(
      key: "q", value: "v", [DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([2, 16])))]),
    "Nested": .variant(.uint32(7)),
    "Pair": .structure([.int32(1), .string("x")]),
  ]

  /// A message holding `arguments`, taken through the wire format as a received one is.
  static func received(_ arguments: [DBusValue]) throws -> DBusMessage {
    let message = try DBusMessage.signal(
      path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
    try message.append(arguments)
    return try DBusMessage(wireBytes: try message.wireBytes())
  }

  @Test func readsWhatTheWholeBodyDecodingReads() throws {
    let interfaces = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string("org.bluez.Device1"), value: .dictionaryOfVariants(Self.properties)),
        DBusDictEntry(
          key: .string("org.freedesktop.DBus.Properties"), value: .dictionaryOfVariants([:])),
      ])
    let message = try Self.received([
      .objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01"), interfaces, .strings(["a", "b"]),
      .string("tail"), .uint64(9),
    ])
    let decoded = try message.arguments()
    let read = try message.read { reader throws(DBusError) in
      (
        try reader.objectPath(), try reader.interfacesAndProperties(), try reader.strings(),
        try reader.string(), try reader.value(), reader.isAtEnd
      )
    }
    #expect(read.0 == decoded[0].objectPathValue)
    var expected: [String: [String: DBusValue]] = [:]
    for entry in decoded[1].dictionaryValue ?? [] {
      expected[entry.key.stringValue!] = entry.value.stringVariantDictionary
    }
    #expect(read.1 == expected)
    #expect(read.1["org.bluez.Device1"]?["Nested"] == .uint32(7))  // every variant unwrapped
    #expect(read.1["org.bluez.Device1"]?["Pair"] == .structure([.int32(1), .string("x")]))
    #expect(read.2 == ["a", "b"])
    #expect(read.3 == "tail")
    #expect(read.4 == .uint64(9))
    #expect(read.5)
  }

  @Test func mismatchesAndMissingArgumentsThrow() throws {
    let message = try Self.received([.string("org.bluez.Device1"), .uint32(3)])
    let errors: [DBusError?] = try message.read { reader throws(DBusError) in
      var errors: [DBusError?] = []
      var first = reader
      // a string, not a path
      do throws(DBusError) { _ = try first.objectPath() } catch { errors.append(error) }
      var second = reader
      // not an array
      do throws(DBusError) { _ = try second.properties() } catch { errors.append(error) }
      _ = try reader.string()
      // a uint32
      do throws(DBusError) { _ = try reader.strings() } catch { errors.append(error) }
      _ = try reader.value()
      // nothing left
      do throws(DBusError) { _ = try reader.string() } catch { errors.append(error) }
      return errors
    }
    #expect(errors.count == 4)
    for error in errors {
      #expect(error?.code == .unexpectedReply)
    }
    #expect(errors.last??.message.contains("fewer arguments") == true)
  }

  @Test func handlersReadSignalsInArrivalOrder() async throws {
    try await withServerAndClient { _, server, client in
      let seen = Mutex<[(String, Int16?)]>([])
      let (done, finish) = AsyncStream.makeStream(of: Void.self)
      let subscription = try await client.handleSignals(
        MatchRule(sender: server.uniqueName, interface: "org.freedesktop.DBus.Properties"),
        reading: { header, reader in
          let interface = try? reader.string()
          let changed = try? reader.properties()
          let count = seen.withLock { seen in
            seen.append(
              ("\(header.path.rawValue) \(interface ?? "?")", changed?["RSSI"]?.int16Value))
            return seen.count
          }
          if count == 3 { finish.yield() }
        })
      for rssi in [-40, -50, -60] as [Int16] {
        try server.emitSignal(
          path: "/org/bluez/hci0/dev_1", interface: "org.freedesktop.DBus.Properties",
          member: "PropertiesChanged",
          arguments: [
            .string("org.bluez.Device1"), .dictionaryOfVariants(["RSSI": .int16(rssi)]),
            .strings([]),
          ])
      }
      for await _ in done { break }
      subscription.cancel()
      let got = seen.withLock { $0 }
      #expect(got.map(\.0) == Array(repeating: "/org/bluez/hci0/dev_1 org.bluez.Device1", count: 3))
      #expect(got.map(\.1) == [-40, -50, -60])
    }
  }
}
