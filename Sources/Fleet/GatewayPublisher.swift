// GatewayPublisher: a gateway's side of the fleet: sightings and summaries to the broker, rate
// limited per device, with retained availability, a last will and Home Assistant discovery.

import BLEKit
import MQTT
import Sightings
import Synchronization

/// What a gateway publishes and how.
public struct GatewaySettings: Sendable {
  /// The broker.
  public var broker: BrokerSettings
  /// The gateway's name and adapter (in every payload).
  public var origin: GatewayOrigin
  /// Topics.
  public var topics: TopicLayout
  /// Publish an unchanged device again after this long (`.zero`: every report).
  public var interval: Duration = .seconds(10)
  /// The RSSI change, in dB, that counts as a change.
  public var rssiDelta: Int? = 5
  /// Publish Home Assistant discovery for each monitored ID.
  public var homeAssistant = false
  /// Seconds after which Home Assistant shows a silent ID's sensor as unavailable.
  public var homeAssistantExpiry = 300
  /// The most devices the rate limiter and discovery remember.
  public var deviceCapacity = 4096

  public init(broker: BrokerSettings, origin: GatewayOrigin, topics: TopicLayout) {
    self.broker = broker
    self.origin = origin
    self.topics = topics
  }
}

/// Publishes one gateway's sightings.
public final class GatewayPublisher: Sendable {
  private struct State {
    var limiter: RateLimiter<ContinuousClock.Instant>
    var sequence = 0
    var announced: Set<String> = []
  }

  private let client: MQTTClient
  private let settings: GatewaySettings
  private let state: Mutex<State>
  /// Connection events after the start (losses, reconnections, drops).
  public let events: AsyncStream<BrokerEvent>

  /// Connects and publishes `online` (retained) on the availability topic, again on every
  /// reconnection; the broker publishes `offline` (retained) if this gateway vanishes.
  public static func connect(_ settings: GatewaySettings) async throws(FleetError)
    -> GatewayPublisher
  {
    let qos = settings.broker.qualityOfService
    let will = MQTTMessage(
      topic: settings.topics.availability, text: "offline", qos: qos, retain: true)
    var broker = settings.broker
    if broker.clientID == nil { broker.clientID = "blekit-\(settings.origin.gateway)" }
    // `online` on every connection: a broker that stopped may have published the will.
    let birth = MQTTMessage(
      topic: settings.topics.availability, text: "online", qos: qos, retain: true)
    let configuration = try broker.configuration(will: will, birth: birth)
    let client: MQTTClient
    do throws(MQTTError) {
      client = try await MQTTClient.connect(configuration)
    } catch {
      throw FleetError(error)
    }
    return GatewayPublisher(client: client, settings: settings)
  }

  private init(client: MQTTClient, settings: GatewaySettings) {
    self.client = client
    self.settings = settings
    state = Mutex(
      State(
        limiter: RateLimiter(
          interval: settings.interval, rssiDelta: settings.rssiDelta,
          capacity: settings.deviceCapacity)))
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

  /// The broker, without its password.
  public var broker: String { client.broker.description }

  /// Publishes a report, unless the rate limiter holds it back; `id` is the monitored ID it
  /// is a sighting of (a FolkBears temporary ID), if any. Returns whether it was published.
  @discardableResult
  public func publish(
    _ report: AdvertisementReport, id: String?, at now: ContinuousClock.Instant = .now
  ) -> Bool {
    var content = report
    content.rssi = nil
    let key = id ?? report.address
    let (publish, sequence, announce) = state.withLock { state -> (Bool, Int, Bool) in
      guard
        state.limiter.shouldPublish(key, fingerprint: content.hashValue, rssi: report.rssi, at: now)
      else { return (false, 0, false) }
      state.sequence += 1
      var announce = false
      if let id, settings.homeAssistant, !state.announced.contains(id) {
        if state.announced.count >= settings.deviceCapacity { state.announced.removeAll() }
        state.announced.insert(id)
        announce = true
      }
      return (true, state.sequence, announce)
    }
    guard publish else { return false }
    if announce, let id { publishHomeAssistantConfig(id: id) }
    let payload: FleetJSON =
      switch settings.topics.layout {
      case .blekit:
        SightingPayload.sighting(
          report, id: id, origin: settings.origin, sequence: sequence, unixTime: fleetUnixTime())
      case .theengs:
        SightingPayload.theengs(report, id: id)
      }
    client.publish(
      MQTTMessage(
        topic: settings.topics.sighting(address: report.address, id: id), text: payload.text,
        qos: settings.broker.qualityOfService))
    return true
  }

  /// Publishes the summary of every ID in a monitor's table.
  public func publishSummaries(
    _ table: SightingTable<ContinuousClock.Instant>, start: ContinuousClock.Instant,
    startUnix: Double, now: ContinuousClock.Instant = .now
  ) {
    for entry in table.entries {
      let sequence = state.withLock { state in
        state.sequence += 1
        return state.sequence
      }
      let payload = SightingPayload.summary(
        entry, origin: settings.origin, sequence: sequence, start: start, startUnix: startUnix,
        now: now)
      client.publish(
        MQTTMessage(
          topic: settings.topics.summary(id: entry.id), text: payload.text,
          qos: settings.broker.qualityOfService))
    }
  }

  /// Home Assistant's discovery config for an ID's RSSI sensor (retained).
  private func publishHomeAssistantConfig(id: String) {
    let payload = HomeAssistantDiscovery.sensorConfig(
      id: id, topics: settings.topics, expireAfter: settings.homeAssistantExpiry)
    client.publish(
      MQTTMessage(
        topic: settings.topics.homeAssistantConfig(id: id), text: payload.text, qos: .atLeastOnce,
        retain: true))
  }

  /// Reports held back by the rate limiter so far.
  public var suppressed: Int { state.withLock { $0.limiter.suppressed } }

  /// Publishes `offline` (retained), waits up to `grace` for what is buffered, and
  /// disconnects. Returns the counts.
  public func close(grace: Duration = .seconds(3)) async -> BrokerReport {
    client.publish(
      MQTTMessage(
        topic: settings.topics.availability, text: "offline",
        qos: settings.broker.qualityOfService, retain: true))
    return BrokerReport(await client.close(grace: grace))
  }
}
