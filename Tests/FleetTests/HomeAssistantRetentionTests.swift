// Home Assistant discovery configs under `--home-assistant`: at most a capacity of them stay
// retained on the broker, the config of an ID unheard for the retention is cleared, and
// configs a former run left are found and expire too. Against a real mosquitto.

import Fleet
import Foundation
import MQTT
import Testing

@Suite struct HomeAssistantRetentionTests {
  /// The retained Home Assistant configs on the broker now, as a newcomer sees them.
  static func retainedConfigs(_ url: String) async throws -> Set<String> {
    var configuration = MQTTConfiguration(broker: try BrokerURL(url))
    configuration.connectTimeout = .seconds(30)
    let client = try await MQTTClient.connect(configuration)
    client.subscribe("homeassistant/#", qos: .atLeastOnce)
    var topics: Set<String> = []
    let reader = Task {
      var seen: Set<String> = []
      while let message = await client.nextMessage() {
        if message.retain && !message.payload.isEmpty { seen.insert(message.topic) }
      }
      return seen
    }
    try await Task.sleep(for: .milliseconds(700))
    await client.close(grace: .zero)
    topics = await reader.value
    return topics
  }

  static func settings(_ url: String, capacity: Int, retention: Duration) -> GatewaySettings {
    var settings = GatewaySettings(
      broker: BrokerSettings(url: url), origin: GatewayOrigin(gateway: "gw", adapter: "hci0"),
      topics: TopicLayout(gateway: "gw"))
    settings.broker.qos = 1
    settings.broker.connectTimeout = .seconds(30)
    settings.interval = .zero
    settings.homeAssistant = true
    settings.homeAssistantCapacity = capacity
    settings.homeAssistantRetention = retention
    return settings
  }

  static func id(_ index: Int) -> String {
    String(repeating: "0", count: 30) + String(format: "%02x", index)
  }

  @Test func configsAreBoundedAndExpire() async throws {
    let broker = try MosquittoBroker()
    let gateway = try await GatewayPublisher.connect(
      Self.settings(broker.url, capacity: 3, retention: .seconds(3)))
    for index in 0..<8 {
      gateway.publish(
        AdvertisementReport(address: "00:AA:01:01:00:01", rssi: -50), id: Self.id(index))
    }
    // Heard again: the newest three stay, the others were cleared as new ones came. The
    // counters are read first: on a loaded machine the broker's answer below can take longer
    // than the retention, after which the sweep has rightly cleared the rest too.
    try await Task.sleep(for: .milliseconds(300))
    #expect(gateway.homeAssistantCleared == 5 && gateway.homeAssistantConfigs == 3)
    let kept = try await Self.retainedConfigs(broker.url)
    #expect(kept == Set((5..<8).map { "homeassistant/sensor/blekit_gw_\(Self.id($0))/config" }))
    // Unheard for the retention (3 s, swept every 0.75 s): cleared.
    try await Task.sleep(for: .seconds(4))
    #expect(try await Self.retainedConfigs(broker.url).isEmpty)
    #expect(gateway.homeAssistantCleared == 8 && gateway.homeAssistantConfigs == 0)
    _ = await gateway.close()
  }

  /// A former run's configs (say it crashed) are found at the start and expire as well;
  /// other gateways' are left alone, one whose name starts with this one's included.
  @Test func configsOfAFormerRunExpire() async throws {
    let broker = try MosquittoBroker()
    // A generous connect limit: a full test run starts many brokers at once on two cores.
    var formerConfiguration = MQTTConfiguration(broker: try BrokerURL(broker.url))
    formerConfiguration.connectTimeout = .seconds(30)
    let former = try await MQTTClient.connect(formerConfiguration)
    // gw's two, a gateway named gw_x's (same name prefix), and another gateway's.
    let configs: [(TopicLayout, String)] = [
      (TopicLayout(gateway: "gw"), "old1"), (TopicLayout(gateway: "gw"), "old2"),
      (TopicLayout(gateway: "gw_x"), "old3"), (TopicLayout(gateway: "other"), "x"),
    ]
    for (topics, id) in configs {
      let config = HomeAssistantDiscovery.sensorConfig(id: id, topics: topics, expireAfter: 300)
      former.publish(
        MQTTMessage(
          topic: topics.homeAssistantConfig(id: id), text: config.text, qos: .atLeastOnce,
          retain: true))
    }
    _ = await former.close(grace: .seconds(5))
    let gateway = try await GatewayPublisher.connect(
      Self.settings(broker.url, capacity: 10, retention: .seconds(2)))
    // The broker hands the retained configs over some time after the subscription; on a
    // loaded machine that can be later than a fixed wait, and a found config may already have
    // expired when it is looked at. Found ones are either still held or cleared, so their sum
    // counts them whatever the timing.
    var waited = Duration.zero
    while gateway.homeAssistantConfigs + gateway.homeAssistantCleared < 2, waited < .seconds(20) {
      try await Task.sleep(for: .milliseconds(50))
      waited += .milliseconds(50)
    }
    #expect(gateway.homeAssistantConfigs + gateway.homeAssistantCleared == 2)
    while gateway.homeAssistantCleared < 2, waited < .seconds(40) {
      try await Task.sleep(for: .milliseconds(50))
      waited += .milliseconds(50)
    }
    #expect(gateway.homeAssistantCleared == 2 && gateway.homeAssistantConfigs == 0)
    #expect(
      try await Self.retainedConfigs(broker.url) == [
        "homeassistant/sensor/blekit_gw_x_old3/config",
        "homeassistant/sensor/blekit_other_x/config",
      ])
    _ = await gateway.close()
  }
}
