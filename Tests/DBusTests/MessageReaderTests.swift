import Glibc
import Synchronization
import Testing

// MessageReader: arguments read one by one agree with the whole-body decoding, mismatches
// throw, and handleSignals(_:reading:) hands each signal's reader to its handler.
@testable import DBus

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
    /// The error of `read` on a fresh reader, after `skip` arguments read as values.
    func failure(
      skipping skip: Int, _ read: (inout MessageReader) throws(DBusError) -> Void
    ) throws -> DBusError? {
      try message.read { reader throws(DBusError) in
        for _ in 0..<skip { _ = try reader.value() }
        do throws(DBusError) { try read(&reader) } catch { return error }
        return nil
      }
    }
    let errors = [
      try failure(skipping: 0) { r throws(DBusError) in _ = try r.objectPath() },  // a string
      try failure(skipping: 0) { r throws(DBusError) in _ = try r.properties() },  // not a{sv}
      try failure(skipping: 1) { r throws(DBusError) in _ = try r.strings() },  // a uint32
      try failure(skipping: 2) { r throws(DBusError) in _ = try r.string() },  // nothing left
    ]
    #expect(errors.count == 4)
    for error in errors {
      #expect(error?.code == .unexpectedReply)
    }
    #expect(errors.last??.message.contains("fewer arguments") == true)
    #expect(try failure(skipping: 0) { r throws(DBusError) in _ = try r.string() } == nil)
  }

  /// Every value shape read from the bytes as libdbus's iterators read it.
  @Test func visitsOneInterfacesPropertiesThenRewinds() throws {
    let interfaces = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string("org.freedesktop.DBus.Introspectable"), value: .dictionaryOfVariants([:])),
        DBusDictEntry(
          key: .string("org.bluez.Battery1"),
          value: .dictionaryOfVariants(["Percentage": .byte(90)])),
        DBusDictEntry(
          key: .string("org.bluez.Device1"), value: .dictionaryOfVariants(Self.properties)),
      ])
    let message = try Self.received([
      .objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01"), interfaces, .string("tail"),
    ])
    let read = try message.read { reader throws(DBusError) in
      var device: [String: DBusValue] = [:]
      var names: [String] = []
      _ = try reader.objectPath()
      let found = try reader.visitProperties(of: "org.bluez.Device1") { name, value in
        names.append(name)
        device[name] = value
      }
      // The argument after the skipped interfaces is where it should be.
      let tail = try reader.string()
      reader.rewind()
      let path = try reader.objectPath()
      let battery = try reader.interfacesAndProperties()["org.bluez.Battery1"]
      reader.rewind()
      _ = try reader.objectPath()
      let absent = try reader.visitProperties(of: "org.bluez.Device") { _, _ in
        Issue.record("a prefix of an interface's name is not that interface")
      }
      return (found, device, names.count, tail, path, battery, absent)
    }
    #expect(read.0)
    #expect(read.1 == Self.properties.mapValues { $0.unwrapped })  // variants unwrapped
    #expect(read.2 == Self.properties.count)  // each property once
    #expect(read.3 == "tail")
    #expect(read.4 == "/org/bluez/hci0/dev_00_AA_01_01_00_01")
    #expect(read.5 == ["Percentage": .byte(90)])
    #expect(!read.6)
  }

  @Test func visitingAnotherShapeThrows() throws {
    let message = try Self.received([.objectPath("/a"), .dictionaryOfVariants(Self.properties)])
    #expect(throws: DBusError.self) {
      try message.read { reader throws(DBusError) in
        _ = try reader.objectPath()
        return try reader.visitProperties(of: "org.bluez.Device1") { _, _ in }
      }
    }
  }

  @Test func bytesReadLikeLibdbusIterators() throws {
    let values: [DBusValue] = [
      .byte(7), .bool(true), .int16(-2), .uint16(65535), .int32(-70000), .uint32(4_000_000_000),
      .int64(-1 << 40), .uint64(1 << 63), .double(-0.25), .string("ünï ✓"), .objectPath("/a/b"),
      .signature("a{sv}"), .bytes([]), .bytes([1, 2, 3]), .strings([]), .strings(["x", "", "yz"]),
      .array(element: "(yd)", [.structure([.byte(1), .double(2)])]),
      .dictionary(
        key: "q", value: "v", [DBusDictEntry(key: .uint16(1), value: .variant(.bytes([9])))]),
      .dictionaryOfVariants([
        "a": .int64(1), "b": .variant(.string("nested")), "c": .strings(["s"]),
      ]),
      .structure([.string("s"), .array(element: "ay", [.bytes([1]), .bytes([])]), .byte(0)]),
      .variant(.dictionary(key: "s", value: "s", [])), .variant(.array(element: "x", [.int64(5)])),
    ]
    let received = try Self.received(values)
    let decoded = try received.arguments()
    let read = try received.read { reader throws(DBusError) in
      var read: [DBusValue] = []
      while !reader.isAtEnd { read.append(try reader.value()) }
      return read
    }
    #expect(read == decoded)
    #expect(decoded.count == values.count)
  }

  /// A big-endian message (written by hand: libdbus sends in the host's order) reads the same.
  @Test func bigEndianBodies() throws {
    var body: [UInt8] = [0xFF, 0xFE]  // q 65534
    body += [0, 0]  // pad to 4
    body += [0x01, 0x02, 0x03, 0x04]  // u
    body += [0, 0, 0, 2] + Array("ab".utf8) + [0]  // s "ab"
    body += [0]  // pad to 8
    body += [0x3F, 0xF0, 0, 0, 0, 0, 0, 0]  // d 1.0
    let signature = Array("qusd".utf8)
    var message: [UInt8] = [UInt8(ascii: "B"), 2, 0, 1]
    message += be32(UInt32(body.count)) + be32(1)
    var fields: [UInt8] = [5, 1, UInt8(ascii: "u"), 0] + be32(1)  // REPLY_SERIAL = 1
    fields += [8, 1, UInt8(ascii: "g"), 0, UInt8(signature.count)] + signature + [0]
    message += be32(UInt32(fields.count)) + fields
    while message.count % 8 != 0 { message.append(0) }
    let received = try DBusMessage(wireBytes: message + body)
    let read = try received.read { reader throws(DBusError) in
      [try reader.value(), try reader.value(), try reader.value(), try reader.value()]
    }
    #expect(read == [.uint16(65534), .uint32(0x0102_0304), .string("ab"), .double(1)])
    #expect(try received.arguments() == read)
  }

  @Test func nestingDeeperThanTheLimitIsMalformedNotARecursion() throws {
    var nested = DBusValue.string("core")
    for _ in 0..<10 { nested = .variant(nested) }
    let message = try DBusMessage.signal(path: "/t", interface: "t.T", member: "M")
    try message.append([nested])
    let received = try DBusMessage(wireBytes: try message.wireBytes())
    var body = try WireBody(received.raw)
    #expect(try body.value(DBusType.parseSingle("v")) == nested)
    body.rewind()
    body.maximumDepth = 8
    #expect(throws: DBusError.self) { try body.value(DBusType.parseSingle("v")) }
  }

  /// Found by the bluez-readers fuzz target: with an interface named twice, a visit saw both
  /// entries while the whole reading keeps the last, so a scan announced a device the tree
  /// did not hold. The visit now refuses the message.
  @Test func visitingAnInterfaceNamedTwiceThrows() throws {
    let twice = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string("org.bluez.Device1"), value: .dictionaryOfVariants(Self.properties)),
        DBusDictEntry(
          key: .string("org.bluez.Device1"), value: .dictionaryOfVariants(["Name": "again"])),
      ])
    let message = try Self.received([.objectPath("/org/bluez/hci0/dev_1"), twice])
    #expect(throws: DBusError.self) {
      try message.read { reader throws(DBusError) in
        _ = try reader.objectPath()
        return try reader.visitProperties(of: "org.bluez.Device1") { _, _ in }
      }
    }
    let whole = try message.read { reader throws(DBusError) in
      _ = try reader.objectPath()
      return try reader.interfacesAndProperties()
    }
    #expect(whole["org.bluez.Device1"] == ["Name": "again"])
  }

  /// Found by the dbus-reader fuzz target: a byte inside 64 variants (the specification's
  /// limit, which libdbus accepts) was refused by the reader, which counted the byte as a
  /// level of nesting, while the whole-body decoder read it.
  @Test func readsAValueInsideAsManyContainersAsLibdbusAccepts() throws {
    // Built as bytes: the encoder stays under the limit.
    let variant: [UInt8] = [1, UInt8(ascii: "v"), 0]  // a variant's signature "v"
    let body = Array(Array(repeating: variant, count: 63).joined()) + [1, UInt8(ascii: "y"), 0, 42]
    var message: [UInt8] = [UInt8(ascii: "B"), 2, 0, 1]
    message += be32(UInt32(body.count)) + be32(1)
    let fields: [UInt8] =
      [5, 1, UInt8(ascii: "u"), 0] + be32(1) + [
        8, 1, UInt8(ascii: "g"), 0, 1, UInt8(ascii: "v"), 0,
      ]
    message += be32(UInt32(fields.count)) + fields
    while message.count % 8 != 0 { message.append(0) }
    let received = try DBusMessage(wireBytes: message + body)
    var nested = DBusValue.byte(42)
    for _ in 0..<64 { nested = .variant(nested) }
    #expect(try received.arguments() == [nested])
    #expect(try received.read { reader throws(DBusError) in try reader.value() } == nested)
    // One more level is past the limit: libdbus refuses the message.
    let deeper = variant + body
    var longer = Array(message[0..<4]) + be32(UInt32(deeper.count)) + Array(message[8...])
    longer += deeper
    #expect(throws: DBusError.self) { try DBusMessage(wireBytes: longer) }
  }

  private func be32(_ value: UInt32) -> [UInt8] {
    (0..<4).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
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

  /// Unix fds come out in body order, nested or not, each read a new descriptor of the same
  /// open file (so a rewound reader reads them again), and the whole-body decode agrees.
  @Test func readsUnixFileDescriptorsInBodyOrder() throws {
    var first: [Int32] = [0, 0]
    var second: [Int32] = [0, 0]
    #expect(pipe(&first) == 0 && pipe(&second) == 0)
    defer { for fd in first + second { close(fd) } }
    let message = try DBusMessage.signal(path: "/", interface: "org.blekit.Test", member: "Fds")
    try message.append([
      .unixFD(FileDescriptor(owning: dup(first[0]))),
      .array(
        element: "(hq)",
        [.structure([.unixFD(FileDescriptor(owning: dup(second[1]))), .uint16(7)])]),
    ])
    func inode(_ value: DBusValue?) -> ino_t? {
      guard case .unixFD(let fd)? = value else { return nil }
      var info = stat()
      return fstat(fd.rawValue, &info) == 0 ? info.st_ino : nil
    }
    func inode(_ fd: Int32) -> ino_t {
      var info = stat()
      _ = fstat(fd, &info)
      return info.st_ino
    }
    let values = try message.arguments()
    #expect(inode(values[0]) == inode(first[0]))
    #expect(inode(values[1].arrayValue?.first?.structureValue?.first) == inode(second[1]))
    try message.read { reader throws(DBusError) in
      let once = try reader.value()
      reader.rewind()
      let again = try reader.value()
      guard case .unixFD(let a) = once, case .unixFD(let b) = again else {
        Issue.record("not fds: \(once), \(again)")
        return
      }
      #expect(a.rawValue != b.rawValue)
      #expect(inode(a.rawValue) == inode(first[0]) && inode(b.rawValue) == inode(first[0]))
    }
  }
}
