import MQTT
import Testing

@Suite struct OutgoingBufferTests {
  func message(_ index: Int) -> MQTTMessage { MQTTMessage(topic: "t/\(index)", text: "\(index)") }

  @Test func dropsTheOldestAndCounts() {
    var buffer = OutgoingBuffer(capacity: 3)
    for index in 0..<5 { buffer.append(message(index)) }
    #expect(buffer.count == 3 && buffer.dropped == 2)
    let first = buffer.popFirst()
    #expect(first?.text == "2")
    buffer.pushFront(message(99))
    buffer.append(message(5))
    // 5 dropped 99 (the oldest); full again, pushing back to the front drops the newest (5).
    buffer.pushFront(message(98))
    #expect(buffer.dropped == 4)
    var order: [String] = []
    while let next = buffer.popFirst() { order.append(next.text) }
    #expect(order == ["98", "3", "4"])
    #expect(buffer.isEmpty)
  }

  @Test func longRunsStayInOrder() {
    var buffer = OutgoingBuffer(capacity: 100)
    var expected = 0
    for index in 0..<10_000 {
      buffer.append(message(index))
      if index % 3 != 0, let next = buffer.popFirst() {
        #expect(Int(next.text)! >= expected)
        expected = Int(next.text)! + 1
      }
    }
    #expect(buffer.count == 100)
    #expect(buffer.dropped > 0)
  }
}

@Suite struct BrokerURLTests {
  @Test func parses() throws {
    let plain = try BrokerURL("mqtt://broker.local")
    #expect(plain.host == "broker.local" && plain.port == 1883 && !plain.usesTLS)
    let full = try BrokerURL("mqtts://me:p%40ss@[::1]:8884/")
    #expect(full.host == "::1" && full.port == 8884 && full.usesTLS)
    #expect(full.user == "me" && full.password == "p@ss")
    #expect(full.description == "mqtts://me@[::1]:8884")
    #expect(try BrokerURL("mqtts://h").port == 8883)
  }

  @Test func rejects() {
    for text in [
      "http://h", "mqtt://", "mqtt://h:0", "mqtt://h:99999", "mqtt://h:x", "mqtt://h/topic",
      "mqtt://@h", "mqtt://u:%zz@h", "mqtt://[::1",
    ] {
      #expect(throws: MQTTError.self, "\(text)") { try BrokerURL(text) }
    }
  }
}
