// FleetSubscriber: the aggregator's broker connection: subscribes to every gateway's topics
// and turns what arrives into sightings and gateway availability.

import MQTT

/// What the aggregator receives.
public enum FleetUpdate: Sendable, Hashable {
  /// A gateway's sighting.
  case sighting(FleetSighting)
  /// A gateway's availability (from `<prefix>/status`).
  case availability(gateway: String, online: Bool)
  /// A gateway's periodic summary (not merged; counted).
  case summary(topic: String)
  /// A message under the filter that is none of the above.
  case unreadable(topic: String)
}

/// Receives every gateway's messages.
public final class FleetSubscriber: Sendable {
  private let client: MQTTClient
  /// Updates, in arrival order.
  public let updates: AsyncStream<FleetUpdate>
  /// Connection events after the start.
  public let events: AsyncStream<BrokerEvent>

  /// Connects and subscribes to `filter` (default `blekit/#`: every gateway under the default
  /// prefix). With a client ID the session is persistent: a broker with persistence keeps
  /// the subscription and queues QoS 1 messages while this subscriber is away.
  public static func connect(_ settings: BrokerSettings, filter: String = "blekit/#")
    async throws(FleetError) -> FleetSubscriber
  {
    let configuration = try settings.configuration(
      will: nil, cleanSession: settings.clientID == nil)
    let client: MQTTClient
    do throws(MQTTError) {
      client = try await MQTTClient.connect(configuration)
    } catch {
      throw FleetError(error)
    }
    client.subscribe(filter, qos: settings.qualityOfService)
    return FleetSubscriber(client: client)
  }

  private init(client: MQTTClient) {
    self.client = client
    updates = AsyncStream(bufferingPolicy: .unbounded) { continuation in
      let task = Task {
        for await message in client.messages {
          continuation.yield(Self.read(message))
        }
        continuation.finish()
      }
      continuation.onTermination = { _ in task.cancel() }
    }
    events = AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
      let task = Task {
        for await event in client.events {
          if let event = BrokerEvent(event) { continuation.yield(event) }
        }
        continuation.finish()
      }
      continuation.onTermination = { _ in task.cancel() }
    }
  }

  /// Reads one message.
  public static func read(_ message: MQTTMessage) -> FleetUpdate {
    if message.topic.hasSuffix("/status") {
      let text = message.text
      if text == "online" || text == "offline" {
        let prefix = message.topic.dropLast("/status".count)
        let gateway = prefix.split(separator: "/").last.map(String.init) ?? String(prefix)
        return .availability(gateway: gateway, online: text == "online")
      }
    }
    if let sighting = FleetSighting(payload: message.payload) { return .sighting(sighting) }
    if message.topic.contains("/summary/") { return .summary(topic: message.topic) }
    return .unreadable(topic: message.topic)
  }

  /// The broker, without its password.
  public var broker: String { client.broker.description }

  /// Disconnects; returns the counts.
  public func close() async -> BrokerReport {
    BrokerReport(await client.close(grace: .zero))
  }
}
