// FleetSubscriber: the aggregator's broker connection: subscribes to every gateway's topics
// and turns what arrives into sightings and gateway availability.

import MQTT
import Synchronization

/// Receives every gateway's messages, in bounded memory: payloads over
/// ``Limits/maximumPayloadSize`` are dropped unread, and at most ``Limits/queuedMessages``
/// received messages and as many read updates wait for a slow reader (the oldest dropped
/// beyond, counted).
public final class FleetSubscriber: Sendable {
  /// The bounds of what waits to be read.
  public struct Limits: Sendable, Hashable {
    /// The largest payload read, in bytes. A blekit sighting of an extended advertisement
    /// (1,650 bytes of data, in hex) takes about 4 KiB.
    public var maximumPayloadSize = 16 * 1024
    /// Messages, and updates, held for a slow reader.
    public var queuedMessages = 1000

    public init() {}
  }

  /// Counts updates dropped behind a slow reader.
  private final class DropCount: Sendable {
    let value = Mutex(0)
  }

  private let client: MQTTClient
  private let dropped: DropCount
  /// Updates, in arrival order.
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
    let configuration = try settings.configuration(
      will: nil, cleanSession: settings.clientID == nil)
    let client: MQTTClient
    do throws(MQTTError) {
      client = try await MQTTClient.connect(configuration)
    } catch {
      throw FleetError(error)
    }
    client.subscribe(filter, qos: settings.qualityOfService)
    return FleetSubscriber(client: client, queued: limits.queuedMessages)
  }

  private init(client: MQTTClient, queued: Int) {
    self.client = client
    let dropped = DropCount()
    self.dropped = dropped
    updates = AsyncStream(bufferingPolicy: .bufferingNewest(Swift.max(1, queued))) {
      continuation in
      let task = Task {
        for await message in client.messages {
          if case .dropped = continuation.yield(Self.read(message)) {
            dropped.value.withLock { $0 += 1 }
          }
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

  /// Updates dropped so far because the reader of ``updates`` did not keep up.
  public var droppedUpdates: Int { dropped.value.withLock { $0 } }

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
