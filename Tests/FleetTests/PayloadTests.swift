import BLEKit
import Bluetooth
import Fleet
import JSON
import Testing

@Suite struct PayloadTests {
  static let folkBears: [UInt8] = [0x02, 0x10] + Array(1...16)

  static let report = AdvertisementReport(
    address: "00:AA:01:01:00:01", addressType: .public, rssi: -60, txPower: 4, name: "Tag \"1\"",
    serviceUUIDs: [BluetoothUUID(uint16: 0x180F)],
    manufacturerData: [0xFFFF: folkBears, 0x004C: [0xAB]],
    serviceData: [BluetoothUUID(uint16: 0x181A): [0x01, 0x02]])

  @Test func folkBearsIDIsDecoded() {
    #expect(Self.report.folkBearsID == "0102030405060708090a0b0c0d0e0f10")
    var other = Self.report
    other.manufacturerData[0xFFFF] = [0x02, 0x10, 0x01]
    #expect(other.folkBearsID == nil)
  }

  @Test func sightingHasEveryField() throws {
    let origin = GatewayOrigin(gateway: "room-1", adapter: "hci0")
    let json = SightingPayload.sighting(
      Self.report, id: Self.report.folkBearsID, origin: origin, sequence: 7, unixTime: 1.5)
    let parsed = try #require(parseJSON(json.text))
    #expect(parsed == json)
    #expect(parsed["type"]?.stringValue == "sighting")
    #expect(parsed["gateway"]?.stringValue == "room-1")
    #expect(parsed["adapter"]?.stringValue == "hci0")
    #expect(parsed["seq"]?.intValue == 7)
    #expect(parsed["timestamp"]?.doubleValue == 1.5)
    #expect(parsed["id"]?.stringValue == "0102030405060708090a0b0c0d0e0f10")
    #expect(parsed["address"]?.stringValue == "00:AA:01:01:00:01")
    #expect(parsed["addressType"]?.stringValue == "public")
    #expect(parsed["rssi"]?.intValue == -60)
    #expect(parsed["txPower"]?.intValue == 4)
    #expect(parsed["name"]?.stringValue == "Tag \"1\"")
    #expect(parsed["serviceUUIDs"] == .array([.string("0000180f-0000-1000-8000-00805f9b34fb")]))
    #expect(
      parsed["manufacturerData"]?["ffff"]?.stringValue == "02100102030405060708090a0b0c0d0e0f10")
    #expect(parsed["manufacturerData"]?["004c"]?.stringValue == "ab")
    #expect(parsed["serviceData"]?["0000181a-0000-1000-8000-00805f9b34fb"]?.stringValue == "0102")
    let sighting = try #require(FleetSighting(payload: Array(json.text.utf8)))
    #expect(sighting.key == "0102030405060708090a0b0c0d0e0f10")
    #expect(sighting.gateway == "room-1" && sighting.rssi == -60 && sighting.sequence == 7)
  }

  @Test func unknownRSSIAndNameAreNull() throws {
    let bare = AdvertisementReport(address: "00:AA:01:00:00:00")
    let json = SightingPayload.sighting(
      bare, id: nil, origin: GatewayOrigin(gateway: "g", adapter: "hci1"), sequence: 1,
      unixTime: 2)
    #expect(json["rssi"] == .null && json["name"] == .null && json["id"] == .null)
    let sighting = try #require(FleetSighting(payload: Array(json.text.utf8)))
    #expect(sighting.key == "00:AA:01:00:00:00" && sighting.rssi == nil)
  }

  @Test func theengsLayout() {
    let json = SightingPayload.theengs(Self.report, id: nil)
    #expect(json["id"]?.stringValue == "00:AA:01:01:00:01")
    #expect(json["mac_type"]?.intValue == 0)
    #expect(json["rssi"]?.intValue == -60)
    #expect(json["txpower"]?.intValue == 4)
    // The lowest company first, its ID little-endian before the data, as Theengs does.
    #expect(json["manufacturerdata"]?.stringValue == "4c00ab")
    #expect(json["servicedata"]?.stringValue == "0102")
    #expect(json["servicedatauuid"]?.stringValue == "0x181a")
  }

  @Test func jsonEscapesAndRejects() {
    let value = JSONValue.object([.init("a\n", .string("\u{1}\u{7F}é\"\\"))])
    #expect(value.text == #"{"a\n":"\u0001\u007fé\"\\"}"#)
    #expect(parseJSON(value.text) == value)
    #expect(parseJSON("{\"a\":1,}") == nil)
    #expect(parseJSON("[1 2]") == nil)
    #expect(parseJSON("{\"a\":tru}") == nil)
    #expect(parseJSON(String(repeating: "[", count: 100)) == nil)
    #expect(parseJSON(" {\"n\": -1.25e2 } ")?["n"]?.doubleValue == -125)
  }

  /// Numbers as RFC 8259 writes them, and nothing else; none beyond Double's range.
  @Test func jsonNumbersFollowTheGrammar() {
    for good in ["0", "-0", "1e300", "-1e300", "4.9e-324", "1E+2", "0.5", "12345678901234567890"] {
      #expect(parseJSON(good)?.doubleValue?.isFinite == true, "\(good)")
    }
    for bad in [
      "1e400", "-1e400", "+1", "01", "1.", ".5", "1e", "1e+", "-", "--1", "0x10", "NaN",
      "Infinity", "1.5.2", "inf",
    ] {
      #expect(parseJSON(bad) == nil, "\(bad)")
    }
    #expect(parseJSON("9223372036854775807") == .int(.max))
    #expect(parseJSON("9223372036854775808") == .number(9_223_372_036_854_775_808))
    #expect(JSONValue.number(1e300).text == "1e+300")
    #expect(parseJSON(JSONValue.number(-1.7976931348623157e308).text) != nil)
  }

  /// What JSON allows raw but a terminal must not get raw is written escaped; escapes read
  /// back, surrogate pairs included.
  @Test func jsonTextIsTerminalSafe() {
    let hostile = "\u{1B}[2J\u{9B}\u{202E}\u{2066}\u{200B}\u{2028}\u{E0041}😀"
    let text = JSONValue.string(hostile).text
    #expect(text == #""\u001b[2J\u009b\u202e\u2066\u200b\u2028\udb40\udc41😀""#)
    #expect(parseJSON(text) == .string(hostile))
    #expect(parseJSON(#""\ud83d\ude00""#) == .string("😀"))
    // A lone surrogate, a key twice, bytes that are not UTF-8: unreadable, not guessed at.
    #expect(parseJSON(#""\ud83d""#) == nil)
    #expect(parseJSON(#"{"type":"sighting","type":"status"}"#) == nil)
    #expect(FleetSighting.parsePayload([0x22, 0xC0, 0x80, 0x22]) == nil)
    #expect(parseJSON(#""\u+123""#) == nil)
    #expect(parseJSON(#""\q""#) == nil)
    #expect(parseJSON(#""\/""#) == .string("/"))
  }

  /// A sighting whose numbers mean nothing never traps; texts are bounded.
  @Test func sightingsFromHostilePayloads() throws {
    func sighting(_ fields: String) -> FleetSighting? {
      FleetSighting(payload: Array(("{\"type\":\"sighting\"," + fields + "}").utf8))
    }
    let far = try #require(
      sighting(#""gateway":"g","address":"A","timestamp":1e300,"rssi":1e300,"seq":1e300"#))
    #expect(far.timestamp == 1e300 && far.rssi == nil && far.sequence == nil)
    #expect(sighting(#""gateway":"g","address":"A","timestamp":1e400"#) == nil)
    #expect(sighting(#""gateway":"g","address":"A","timestamp":"NaN""#) == nil)
    let huge = try #require(
      sighting(#""gateway":"g","address":"A","timestamp":1,"rssi":-9223372036854775808"#))
    #expect(huge.rssi == nil)
    #expect(sighting(#""gateway":"","address":"A","timestamp":1"#) == nil)
    let long = String(repeating: "g", count: 257)
    #expect(sighting(#""gateway":"\#(long)","address":"A","timestamp":1"#) == nil)
    #expect(sighting(#""gateway":"g","address":"A","id":"\#(long)","timestamp":1"#) == nil)
    #expect(FleetTable.age(of: 1e300, now: 1_000) == "ahead")
    #expect(FleetTable.age(of: -1e300, now: 1_000) == "?")
    #expect(FleetTable.age(of: -1.7976931348623157e308, now: 1e308) == "?")
    #expect(FleetTable.age(of: 990, now: 1_000) == "10s ago")
    #expect(FleetTable.age(of: 1_030, now: 1_000) == "0s ago")
  }
}

@Suite struct TopicLayoutTests {
  @Test func blekitLayout() {
    let topics = TopicLayout(gateway: "kitchen")
    #expect(topics.prefix == "blekit/kitchen")
    #expect(topics.availability == "blekit/kitchen/status")
    #expect(
      topics.sighting(address: "00:aa:01:01:00:01", id: nil)
        == "blekit/kitchen/devices/00:AA:01:01:00:01")
    #expect(topics.sighting(address: "00:AA:01:01:00:01", id: "0a0b") == "blekit/kitchen/ids/0a0b")
    #expect(topics.summary(id: "a/b+#") == "blekit/kitchen/summary/a_b__")
    #expect(
      topics.homeAssistantConfig(id: "0a0b") == "homeassistant/sensor/blekit_kitchen_0a0b/config")
  }

  @Test func customPrefixAndTheengs() {
    #expect(TopicLayout(gateway: "g", prefix: "site/3/").prefix == "site/3")
    let theengs = TopicLayout(layout: .theengs, gateway: "gw1")
    #expect(theengs.availability == "home/gw1/LWT")
    #expect(
      theengs.sighting(address: "00:aa:01:01:00:01", id: "x") == "home/gw1/BTtoMQTT/00AA01010001")
    #expect(
      TopicLayout.isPrefix("a/b") && !TopicLayout.isPrefix("a//b") && !TopicLayout.isPrefix("a/+"))
    #expect(
      !TopicLayout.isPrefix("$SYS/x") && !TopicLayout.isSegment("a/b")
        && TopicLayout.isSegment("a-b"))
  }

  @Test func homeAssistantConfig() {
    let topics = TopicLayout(gateway: "hall")
    let config = HomeAssistantDiscovery.sensorConfig(id: "0a0b", topics: topics, expireAfter: 300)
    #expect(config["state_topic"]?.stringValue == "blekit/hall/ids/0a0b")
    #expect(config["availability_topic"]?.stringValue == "blekit/hall/status")
    #expect(config["unique_id"]?.stringValue == "blekit_hall_0a0b")
    #expect(config["device_class"]?.stringValue == "signal_strength")
    #expect(config["expire_after"]?.intValue == 300)
  }
}

@Suite struct RateLimiterTests {
  typealias Limiter = RateLimiter<ContinuousClock.Instant>
  let t0 = ContinuousClock.now

  @Test func publishesOnChangeOrInterval() {
    var limiter = Limiter(interval: .seconds(10), rssiDelta: 5)
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 1, rssi: -60, at: t0)
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 1, rssi: -62, at: t0 + .seconds(1))
      #expect(!ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 2, rssi: -62, at: t0 + .seconds(2))
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 2, rssi: -70, at: t0 + .seconds(3))
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 2, rssi: -70, at: t0 + .seconds(12))
      #expect(!ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 2, rssi: -70, at: t0 + .seconds(13))
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("b", fingerprint: 2, rssi: -70, at: t0 + .seconds(13))
      #expect(ok)
    }
    #expect(limiter.suppressed == 2)
  }

  @Test func unknownRSSIChangeCountsAndZeroIntervalPublishesAll() {
    var limiter = Limiter(interval: .seconds(10), rssiDelta: 5)
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 1, rssi: nil, at: t0)
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 1, rssi: nil, at: t0)
      #expect(!ok)
    }
    do {
      let ok = limiter.shouldPublish("a", fingerprint: 1, rssi: -50, at: t0)
      #expect(ok)
    }
    var every = Limiter(interval: .zero)
    for _ in 0..<5 {
      let ok = every.shouldPublish("a", fingerprint: 1, rssi: nil, at: t0)
      #expect(ok)
    }
  }

  @Test func memoryIsBounded() {
    var limiter = Limiter(interval: .seconds(10), capacity: 3)
    for index in 0..<10 {
      _ = limiter.shouldPublish("k\(index)", fingerprint: 0, rssi: nil, at: t0 + .seconds(index))
    }
    #expect(limiter.count == 3)
    // k0 was forgotten: it is new again.
    do {
      let ok = limiter.shouldPublish("k0", fingerprint: 0, rssi: nil, at: t0 + .seconds(11))
      #expect(ok)
    }
    do {
      let ok = limiter.shouldPublish("k9", fingerprint: 0, rssi: nil, at: t0 + .seconds(11))
      #expect(!ok)
    }
  }
}

@Suite struct FleetTableTests {
  @Test func mergesGateways() {
    var table = FleetTable(capacity: 2)
    table.record(FleetSighting(key: "id1", gateway: "b", address: "A1", rssi: -70, timestamp: 10))
    table.record(FleetSighting(key: "id1", gateway: "a", address: "A1", rssi: nil, timestamp: 11))
    let row = table.record(
      FleetSighting(key: "id1", gateway: "b", address: "A2", rssi: -60, timestamp: 12))
    #expect(row.gateways.map(\.gateway) == ["a", "b"])
    #expect(row.bestRSSI == -60 && row.lastSeen == 12 && row.count == 3 && row.lastAddress == "A2")
    table.record(FleetSighting(key: "id2", gateway: "a", address: "A3", rssi: -80, timestamp: 13))
    table.record(FleetSighting(key: "id3", gateway: "a", address: "A4", rssi: -80, timestamp: 14))
    #expect(table.count == 2 && table.evicted == 1 && table["id1"] == nil)
    let json = FleetTable.json(table["id3"]!)
    #expect(
      json["gateways"]
        == .array([
          .object([
            .init("gateway", .string("a")), .init("bestRSSI", .int(-80)),
            .init("lastSeen", .number(14)),
            .init("count", .int(1)),
          ])
        ]))
  }

  /// Rows, gateways per row and availability are bounded; what goes is the least recently
  /// heard, whatever timestamps the payloads chose.
  @Test func boundsHoldAgainstChosenTimestamps() {
    var table = FleetTable(capacity: 3, gatewaysPerRow: 2, gatewayCapacity: 2)
    table.record(FleetSighting(key: "far", gateway: "g", address: "A", rssi: nil, timestamp: 1e300))
    for index in 0..<5 {
      table.record(
        FleetSighting(key: "k\(index)", gateway: "g", address: "A", rssi: nil, timestamp: 10))
    }
    #expect(table.count == 3 && table["far"] == nil && table.evicted == 3)
    #expect(table.entries.map(\.key) == ["k4", "k3", "k2"])
    var row: FleetTable.Row?
    for gateway in ["a", "b", "c", "a", "d"] {
      row = table.record(
        FleetSighting(key: "k4", gateway: gateway, address: "A", rssi: nil, timestamp: 10))
    }
    #expect(row?.gateways.map(\.gateway) == ["a", "d"])
    #expect(row?.droppedGateways == 4 && table.droppedGateways == 4)
    #expect(FleetTable.json(row!)["droppedGateways"] == .int(4))
    let news = [
      table.setGateway("x", online: true), table.setGateway("x", online: true),
      table.setGateway("y", online: false), table.setGateway("z", online: true),
    ]
    #expect(news == [true, false, true, true])
    #expect(table.gatewayOnline == ["y": false, "z": true] && table.forgottenGateways == 1)
  }
}
