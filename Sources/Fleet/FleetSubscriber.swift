// FleetSubscriber: the aggregator's broker connection: subscribes to every gateway's topics
// and turns what arrives into sightings and gateway availability.

import MQTT

/// Receives every gateway's messages, in bounded memory: payloads over
/// ``Limits/maximumPayloadSize`` are dropped unread, and at most ``Limits/queuedMessages``
/// received messages of at most ``Limits/queuedBytes`` in all wait for the reader of
/// ``updates`` (the oldest dropped beyond, counted in ``BrokerReport/dropped``). A message is
/// read into an update only when the reader asks for the next one: there is no second queue.
public final class FleetSubscriber: Sendable {
  /// The bounds of what waits to be read.
  public struct Limits: Sendable, Hashable {
    /// The largest payload read, in bytes. A blekit sighting of an extended advertisement
    /// (1,650 bytes of data, in hex) takes about 4 KiB.
    public var maximumPayloadSize = 16 * 1024
    /// Received messages waiting to be read (a burst of retained messages, or a persistent
    /// session's backlog, waits here).
    public var queuedMessages = 100_000
    /// Bytes of received messages waiting to be read (payload, topic and 64 a message).
    public var queuedBytes = 16 << 20

    public init() {}
  }

  private let client: MQTTClient
  /// Updates, in arrival order, for one reader.
  public let updates: AsyncStream<FleetUpdate>
  /// Connection events after the start.
  public let events: AsyncStream<BrokerEvent>

  /// Connects and subscribes to `filter` (default `blekit/#`: every gateway under the default
  /// prefix). With a client ID the session is persistent: a broker with persistence keeps
  /// the subscription and queues QoS 1 messages while this subscriber is away.
  public static func connect(
    _ settings: BrokerSettings, filter: String = "blekit/#", limits: Limits = Limits()
  ) async throws(FleetError) -> FleetSubscriber {
    var settings = settings
    settings.maximumPayloadSize = limits.maximumPayloadSize
    settings.receiveCapacity = limits.queuedMessages
    settings.receiveByteCapacity = limits.queuedBytes
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
    updates = AsyncStream(unfolding: { await client.nextMessage().map(Self.read) })
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

  /// Reads one message (see ``FleetUpdate/init(topic:payload:)``).
  public static func read(_ message: MQTTMessage) -> FleetUpdate {
    FleetUpdate(topic: message.topic, payload: message.payload)
  }

  /// The broker, without its password.
  public var broker: String { client.broker.description }

  /// Disconnects; returns the counts.
  public func close() async -> BrokerReport {
    BrokerReport(await client.close(grace: .zero))
  }
}
