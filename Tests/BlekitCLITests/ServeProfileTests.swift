// `blekit serve` profiles: the bundled ones load, every mistake is reported with its path in
// the file, values encode as documented (docs/serve.md), counters step and wrap.
import BLEKit
import JSON
import Testing

@testable import blekit

@Suite struct ServeProfileTests {
  /// The checkout's root, from this file's path.
  static let root: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
  }()

  func decode(_ text: String) throws(ProfileError) -> ServeProfile {
    try ServeProfile.decode(Array(text.utf8), file: "p.json")
  }

  /// The error line for `text`, or nil when it loads.
  func refusal(_ text: String) -> String? {
    do {
      _ = try decode(text)
      return nil
    } catch {
      return error.description
    }
  }

  /// A one-service profile around one characteristic's JSON.
  func withCharacteristic(_ characteristic: String) -> String {
    #"{"services":[{"uuid":"180d","characteristics":["# + characteristic + "]}]}"
  }

  @Test(arguments: [
    "heart-rate", "battery", "device-information", "nordic-uart", "environmental-sensing",
    "health-thermometer",
  ])
  func bundledProfilesLoad(name: String) throws {
    let profile = try ServeCommand.load("\(Self.root)/profiles/\(name).json")
    #expect(!profile.services.isEmpty)
    #expect(!profile.advertisement.services.isEmpty)
    _ = try profile.advertisement.payload.validateLegacySize()
  }

  @Test func heartRateProfileIsWhatTheLabExpects() throws {
    let profile = try ServeCommand.load("\(Self.root)/profiles/heart-rate.json")
    let heartRate = profile.services[0]
    #expect(heartRate.uuid == BluetoothUUID(uint16: 0x180D))
    let measurement = heartRate.characteristics[0]
    #expect(measurement.properties == .notify)
    guard case .periodic(let interval, .counter(let counter)) = measurement.notifier else {
      Issue.record("2a37 has no periodic counter: \(String(describing: measurement.notifier))")
      return
    }
    #expect(interval == .seconds(1))
    #expect(counter.bytes(for: 60) == [0x00, 60])
    #expect(heartRate.characteristics[1].value == .fixed([0x01]))
    #expect(heartRate.characteristics[2].writes == .print)
    #expect(profile.advertisement.appearance == 833)
  }

  @Test(
    arguments: [
      (#"{"uint8": 200}"#, [200]), (#"{"uint16": 4520}"#, [0xA8, 0x11]),
      (#"{"sint16": -2}"#, [0xFE, 0xFF]), (#"{"uint32": 16909060}"#, [4, 3, 2, 1]),
      (#"{"sint8": -128}"#, [0x80]), (#"{"hex": "0a0B ff"}"#, [0x0A, 0x0B, 0xFF]),
      (#"{"text": "hé"}"#, [0x68, 0xC3, 0xA9]), (#""plain""#, Array("plain".utf8)),
    ] as [(String, [UInt8])])
  func fixedValuesEncodeLittleEndian(json: String, bytes: [UInt8]) throws {
    let profile = try decode(
      withCharacteristic(#"{"uuid":"2a38","properties":["read"],"value":"# + json + "}"))
    #expect(profile.services[0].characteristics[0].value == .fixed(bytes))
  }

  @Test(arguments: [
    // (characteristic JSON, the error after "p.json: ")
    (
      #"{"uuid":"2a3g","properties":["read"],"value":"x"}"#,
      "services[0].characteristics[0].uuid: '2a3g' is not a UUID"
    ),
    (
      #"{"uuid":"2a37","properties":["notify"]}"#,
      "services[0].characteristics[0].notifier: missing: a notify or indicate characteristic"
    ),
    (
      #"{"uuid":"2a37","properties":["read"]}"#,
      "services[0].characteristics[0].value: missing: a readable characteristic needs a value"
    ),
    (
      #"{"uuid":"2a37","properties":["write"],"value":"x"}"#,
      "services[0].characteristics[0].value: a value is for reads"
    ),
    (
      #"{"uuid":"2a37","properties":["read","shout"],"value":"x"}"#,
      "services[0].characteristics[0].properties[1]: 'shout' is not one of read, write"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"valeu":"x"}"#,
      "services[0].characteristics[0].valeu: unknown key"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":{"uint8":256}}"#,
      "services[0].characteristics[0].value.uint8: 256 is out of range (0...255)"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":{"hex":"0g"}}"#,
      "services[0].characteristics[0].value.hex: "
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":{"text":"a","hex":"01"}}"#,
      "services[0].characteristics[0].value: give one source, not 2 (text, hex)"
    ),
    (
      #"{"uuid":"2a37","properties":["notify"],"notifier":{"every":0,"value":"x"}}"#,
      "services[0].characteristics[0].notifier.every: 0.0 is not between 0.01 and 3600 seconds"
    ),
    (
      #"{"uuid":"2a37","properties":["notify"],"notifier":{"stdin":"binary"}}"#,
      "services[0].characteristics[0].notifier.stdin: 'binary' is not text or hex"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":{"counter":{"from":10,"to":5}}}"#,
      "services[0].characteristics[0].value.counter.to: 5 is never reached from 10"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":"x","descriptors":[{"uuid":"2902","value":"x"}]}"#,
      "services[0].characteristics[0].descriptors[0].uuid: BlueZ adds descriptor 2902 itself"
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":"x","writes":"print"}"#,
      "services[0].characteristics[0].writes: 'properties' has neither \"write\""
    ),
    (
      #"{"uuid":"2a37","properties":["read"],"value":"x","format":{"type":"uint7"}}"#,
      "services[0].characteristics[0].format.type: 'uint7' is not one of"
    ),
  ])
  func mistakesNameTheirPlace(characteristic: String, expected: String) {
    let line = refusal(withCharacteristic(characteristic))
    #expect(line?.hasPrefix("p.json: " + expected) == true, "\(line ?? "accepted")")
  }

  @Test func documentLevelMistakes() {
    #expect(refusal("{}") == "p.json: services: missing")
    #expect(refusal(#"{"services":[]}"#) == "p.json: services: no services: give at least one")
    #expect(refusal("[]") == "p.json: expected an object, found an array")
    #expect(
      refusal(#"{"services":[{"uuid":"180d"}]}"#) == "p.json: services[0].characteristics: missing")
    #expect(
      refusal(#"{"services":[{"uuid":"180d","characteristics":[]}]}"#)
        == "p.json: services[0].characteristics: no characteristics: give at least one")
    let twoStdin =
      #"{"services":[{"uuid":"180d","characteristics":["#
      + #"{"uuid":"2a37","properties":["notify"],"notifier":{"stdin":"text"}},"#
      + #"{"uuid":"2a38","properties":["notify"],"notifier":{"stdin":"hex"}}]}]}"#
    #expect(
      refusal(twoStdin)
        == "p.json: services[0].characteristics[1].notifier: standard input already feeds "
        + "services[0].characteristics[0]; only one notifier can read it")
    let tooBig =
      #"{"advertise":{"services":["6e400001-b5a3-f393-e0a9-e50e24dcca9e","#
      + #""6e400002-b5a3-f393-e0a9-e50e24dcca9e"]},"#
      + #""services":[{"uuid":"180d","characteristics":[{"uuid":"2a38","properties":["read"],"value":"x"}]}]}"#
    #expect(refusal(tooBig)?.hasPrefix("p.json: advertise: ") == true)
  }

  @Test(arguments: [
    (
      "{\n  \"services\": [\n    {\"uuid\": \"180d\",, }",
      "line 3, column 21: not valid JSON: expected a key in quotes"
    ),
    ("{\"a\": 1, \"a\": 2}", "line 1, column 10: not valid JSON: key 'a' given twice"),
    ("{\"a\": tru}", "line 1, column 7: not valid JSON: expected a value"),
    ("{\"a\": \"é\u{01}\"}", "line 1, column 9: not valid JSON: control character in a string"),
    ("{} x", "line 1, column 4: not valid JSON: unexpected text after the end"),
  ])
  func syntaxErrorsSayLineAndColumn(text: String, expected: String) {
    #expect(refusal(text) == "p.json: " + expected)
  }

  @Test func jsonReaderKeepsOrderEscapesAndNumbers() throws {
    let value = try JSONValue.parse(
      Array(#"{"b": [1, -2.5e3, true, null], "a": "x\u00e9\ud83d\udc3b\n"}"#.utf8),
      maximumDepth: ServeProfile.maximumDepth)
    #expect(
      value
        == .object([
          .init("b", .array([.int(1), .number(-2500), .bool(true), .null])),
          .init("a", .string("xé🐻\n")),
        ]))
  }

  @Test func countersStepAndWrap() async throws {
    let up = ServeValueProducer(
      .counter(.init(from: 254, to: 255, step: 1, width: 1, prefix: [0x00])))
    #expect(try await up.produce() == [0x00, 254])
    #expect(try await up.produce() == [0x00, 255])
    #expect(try await up.produce() == [0x00, 254])
    let down = ServeValueProducer(.counter(.init(from: 2, to: 0, step: -2, width: 2, prefix: [])))
    #expect(try await down.produce() == [2, 0])
    #expect(try await down.produce() == [0, 0])
    #expect(try await down.produce() == [2, 0])
  }

  @Test func commandsAndFilesProduceTheirBytes() async throws {
    let command = ServeValueProducer(.command("printf 'abc\\n'"))
    #expect(try await command.produce() == Array("abc".utf8))
    let failing = ServeValueProducer(.command("exit 3"))
    await #expect(throws: ServeValueError.self) { try await failing.produce() }
    let long = ServeValueProducer(.command("head -c 600 /dev/zero"))
    #expect(try await long.produce().count == 512)
    let file = ServeValueProducer(.file("\(Self.root)/profiles/battery.json"))
    #expect(try await file.produce().first == UInt8(ascii: "{"))
    let missing = ServeValueProducer(.file("/nonexistent/value"))
    await #expect(throws: ServeValueError.self) { try await missing.produce() }
  }

  @Test func presentationFormatAndDescriptionBecomeDescriptors() throws {
    let profile = try decode(
      withCharacteristic(
        #"{"uuid":"2a6e","properties":["read"],"value":{"sint16":2150},"description":"Temp","#
          + #""format":{"type":"sint16","exponent":-2,"unit":"272f"},"#
          + #""descriptors":[{"uuid":"a0b1","value":{"hex":"01"},"writable":true}]}"#))
    let descriptors = profile.services[0].characteristics[0].descriptors
    #expect(
      descriptors == [
        .init(uuid: BluetoothUUID(uint16: 0x2901), value: Array("Temp".utf8), writable: false),
        .init(
          uuid: BluetoothUUID(uint16: 0x2904),
          value: [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x00], writable: false),
        .init(uuid: BluetoothUUID(uint16: 0xA0B1), value: [0x01], writable: true),
      ])
    #expect(
      refusal(
        withCharacteristic(
          #"{"uuid":"2a6e","properties":["read"],"value":"x","description":"T","#
            + #""descriptors":[{"uuid":"2901","value":"again"}]}"#))
        == "p.json: services[0].characteristics[0].descriptors[0].uuid: descriptor 2901 is "
        + "already given")
  }

  @Test func permissionsUseBlueZsNames() throws {
    let profile = try decode(
      withCharacteristic(
        #"{"uuid":"2a6e","properties":["read","write"],"value":"x","#
          + #""permissions":["encrypt-authenticated-read","secure-write"]}"#))
    #expect(
      profile.services[0].characteristics[0].permissions
        == [.readAuthenticationRequired, .writeSecureConnectionsRequired])
  }
}

@Suite struct ServeOutputTests {
  func request(_ value: [UInt8], descriptor: BluetoothUUID? = nil, offset: Int = 0)
    -> ATTWriteRequest
  {
    ATTWriteRequest(
      characteristic: BluetoothUUID(uint16: 0x2A39), descriptor: descriptor,
      central: Central(identifier: "/org/bluez/hci1/dev_00_AA_01_00_00_00"), value: value,
      offset: offset, withoutResponse: false, mtu: 517, link: .le)
  }

  @Test func writeLinesShowTextOrHex() {
    #expect(
      ServeOutput.writeLine(request(Array("hi there".utf8)), hex: false)
        == "write 2a39 from 00:AA:01:00:00:00: hi there")
    #expect(
      ServeOutput.writeLine(request([0x01, 0xFF]), hex: false)
        == "write 2a39 from 00:AA:01:00:00:00: hex 01ff")
    #expect(
      ServeOutput.writeLine(request(Array("hi".utf8)), hex: true)
        == "write 2a39 from 00:AA:01:00:00:00: hex 6869")
    #expect(
      ServeOutput.writeLine(
        request(Array("x".utf8), descriptor: BluetoothUUID(uint16: 0x2901), offset: 3), hex: false)
        == "write 2a39/2901 from 00:AA:01:00:00:00 at offset 3: x")
  }

  @Test func requestFieldsCarryTheCentralMTUAndLink() {
    let fields = ServeOutput.requestFields(
      "write", service: BluetoothUUID(uint16: 0x180D),
      characteristic: BluetoothUUID(uint16: 0x2A39),
      descriptor: nil, central: Central(identifier: "/org/bluez/hci1/dev_00_AA_01_00_00_00"),
      mtu: 517, link: .le, offset: 0)
    #expect(
      JSONValue.object(fields).text
        == #"{"event":"write","service":"180d","characteristic":"2a39","descriptor":null,"#
        + #""central":"00:AA:01:00:00:00","mtu":517,"link":"LE","offset":0}"#)
  }

  /// A refusal quotes the file's keys and values; a control or bidi character in them is shown
  /// escaped, not handed to the terminal (found by fuzz/profile-json).
  @Test func refusalsShowTheFilesControlsEscaped() throws {
    let profiles = ServeProfileTests()
    let key = profiles.refusal(#"{"services":[],"\u001b]0;title\u0007":1}"#)
    #expect(
      key == #"p.json: \x1b]0;title\x07: unknown key (known here: services, advertise, notes)"#)
    let value = try #require(
      profiles.refusal(
        profiles.withCharacteristic(
          #"{"uuid":"2a39","properties":["write"],"writes":"\u001b[2J\u202e"}"#)))
    #expect(value.hasSuffix(#"'\x1b[2J\u{202e}' is not one of print, stdout, ignore"#))
    let raw = try #require(
      profiles.refusal("{\"services\":[{\"uuid\":\"\u{9b}\u{202E}\",\"characteristics\":[]}]}"))
    for scalar in raw.unicodeScalars {
      #expect(
        scalar == "\\" || !TerminalText.needsEscape(scalar), "raw U+\(scalar.value) in \(raw)")
    }
  }
}
