// GatewayPublisher: a gateway's side of the fleet: sightings and summaries to the broker, rate
// limited per device, with retained availability, a last will and Home Assistant discovery.

import BLEKit
import JSON
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
  /// The most Home Assistant configs this gateway keeps retained on the broker; beyond, the
  /// config of the ID silent the longest is cleared. Anyone in radio range can mint
  /// FolkBears-shaped IDs: without a bound each would stay on the broker, and in Home
  /// Assistant, for good.
  public var homeAssistantCapacity = 256
  /// How long an ID may go unheard before its retained config is cleared (Home Assistant
  /// then removes the sensor).
  public var homeAssistantRetention: Duration = .seconds(900)
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
    /// Retained Home Assistant configs on the broker: config topic to when its ID was last
    /// heard (for configs a former run left, when this run found them).
    var announced: [String: ContinuousClock.Instant] = [:]
    var homeAssistantCleared = 0
    var sweeper: Task<Void, Never>?
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
    let publisher = GatewayPublisher(client: client, settings: settings)
    if settings.homeAssistant { publisher.startHomeAssistantUpkeep() }
    return publisher
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
    let configTopic = id.map { settings.topics.homeAssistantConfig(id: $0) }
    let (publish, sequence, announce, cleared) = state.withLock {
      state -> (Bool, Int, Bool, [String]) in
      var cleared: [String] = []
      if settings.homeAssistant, let configTopic, state.announced[configTopic] != nil {
        state.announced[configTopic] = now
      }
      guard
        state.limiter.shouldPublish(key, fingerprint: content.hashValue, rssi: report.rssi, at: now)
      else { return (false, 0, false, cleared) }
      state.sequence += 1
      var announce = false
      if settings.homeAssistant, let configTopic, state.announced[configTopic] == nil {
        cleared = Self.makeRoom(&state, capacity: settings.homeAssistantCapacity - 1)
        state.announced[configTopic] = now
        announce = true
      }
      return (true, state.sequence, announce, cleared)
    }
    clearHomeAssistantConfigs(cleared)
    guard publish else { return false }
    if announce, let id { publishHomeAssistantConfig(id: id) }
    let payload: JSONValue =
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

  // MARK: Home Assistant configs: bounded, expired

  /// Removes the longest-silent configs until at most `capacity` remain; returns their topics.
  private static func makeRoom(_ state: inout State, capacity: Int) -> [String] {
    var cleared: [String] = []
    let excess = state.announced.count - Swift.max(0, capacity)
    if excess > 0 {
      let oldest = state.announced.sorted { $0.value < $1.value }.prefix(excess)
      for (topic, _) in oldest {
        state.announced[topic] = nil
        cleared.append(topic)
      }
    }
    return cleared
  }

  /// Clears retained configs (an empty retained message: Home Assistant removes the sensor).
  private func clearHomeAssistantConfigs(_ topics: [String]) {
    guard !topics.isEmpty else { return }
    state.withLock { $0.homeAssistantCleared += topics.count }
    for topic in topics {
      client.publish(MQTTMessage(topic: topic, payload: [], qos: .atLeastOnce, retain: true))
    }
  }

  /// Clears the configs of IDs unheard for ``GatewaySettings/homeAssistantRetention``.
  public func expireHomeAssistantConfigs(at now: ContinuousClock.Instant = .now) {
    let retention = settings.homeAssistantRetention
    let cleared = state.withLock { state -> [String] in
      let expired = state.announced.filter { now - $0.value >= retention }.map(\.key)
      for topic in expired { state.announced[topic] = nil }
      return expired
    }
    clearHomeAssistantConfigs(cleared)
  }

  /// Home Assistant configs cleared so far (expired, or to stay within the capacity).
  public var homeAssistantCleared: Int { state.withLock { $0.homeAssistantCleared } }

  /// Home Assistant configs this gateway has retained on the broker now.
  public var homeAssistantConfigs: Int { state.withLock { $0.announced.count } }

  /// Finds the retained configs a former run of this gateway left (subscribing to the
  /// discovery prefix's sensor configs; those named `blekit_<gateway>_...` whose
  /// `availability_topic` is this gateway's are its own)
  /// so that they too are bounded and expire, and sweeps expired configs every quarter of the
  /// retention (at most a minute) whether or not anything is heard.
  private func startHomeAssistantUpkeep() {
    let prefix =
      "\(settings.topics.discoveryPrefix)/sensor/\(settings.topics.homeAssistantObjectID(""))"
    client.subscribe("\(settings.topics.discoveryPrefix)/sensor/+/config", qos: .atLeastOnce)
    let availability = settings.topics.availability
    let period = Swift.min(settings.homeAssistantRetention / 4, .seconds(60))
    let task = Task { [weak self, client] in
      await withTaskGroup(of: Void.self) { group in
        group.addTask {
          // Retained ones only: this gateway's own configs come back too, not retained. The
          // name's prefix alone would also match a gateway named `<gateway>_more`: the config
          // must name this gateway's availability topic.
          while let message = await client.nextMessage() {
            guard message.retain, !message.payload.isEmpty, message.topic.hasPrefix(prefix),
              message.payload.count <= 4096,
              FleetSighting.parsePayload(message.payload)?["availability_topic"]?.stringValue
                == availability
            else { continue }
            self?.adoptHomeAssistantConfig(message.topic)
          }
        }
        group.addTask {
          while !Task.isCancelled {
            try? await Task.sleep(for: Swift.max(period, .milliseconds(100)))
            self?.expireHomeAssistantConfigs()
          }
        }
      }
    }
    state.withLock { $0.sweeper = task }
  }

  private func adoptHomeAssistantConfig(_ topic: String) {
    let cleared = state.withLock { state -> [String] in
      guard state.announced[topic] == nil else { return [] }
      let cleared = Self.makeRoom(&state, capacity: settings.homeAssistantCapacity - 1)
      state.announced[topic] = .now
      return cleared
    }
    clearHomeAssistantConfigs(cleared)
  }

  /// Reports held back by the rate limiter so far.
  public var suppressed: Int { state.withLock { $0.limiter.suppressed } }

  /// Publishes `offline` (retained), waits up to `grace` for what is buffered, and
  /// disconnects. Returns the counts.
  public func close(grace: Duration = .seconds(3)) async -> BrokerReport {
    state.withLock { $0.sweeper }?.cancel()
    client.publish(
      MQTTMessage(
        topic: settings.topics.availability, text: "offline",
        qos: settings.broker.qualityOfService, retain: true))
    return BrokerReport(await client.close(grace: grace))
  }
}
