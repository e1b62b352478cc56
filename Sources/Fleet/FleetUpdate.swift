// FleetUpdate: what one message under the aggregator's topic filter says (a sighting, a
// gateway's availability, a summary, or nothing it reads), decided from its topic and payload
// alone (no MQTT types, so that the fuzz target compiles it with FleetTable and the JSON module).

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

  /// Reads one message: `online`/`offline` on a topic ending in `/status` is the availability
  /// of the gateway named by the level before it (at most
  /// ``FleetSighting/maximumTextLength`` bytes); a payload ``FleetSighting`` reads is a
  /// sighting.
  public init(topic: String, payload: [UInt8]) {
    if topic.hasSuffix("/status"), payload.count <= 7 {
      let text = String(decoding: payload, as: UTF8.self)
      if text == "online" || text == "offline" {
        let prefix = topic.dropLast("/status".count)
        let gateway = prefix.split(separator: "/").last.map(String.init) ?? String(prefix)
        if !gateway.isEmpty, gateway.utf8.count <= FleetSighting.maximumTextLength {
          self = .availability(gateway: gateway, online: text == "online")
          return
        }
      }
    }
    if let sighting = FleetSighting(payload: payload) {
      self = .sighting(sighting)
    } else if topic.contains("/summary/") {
      self = .summary(topic: topic)
    } else {
      self = .unreadable(topic: topic)
    }
  }
}
