// MQTTMessage: one PUBLISH, outgoing or received: topic, payload, QoS and the retain flag.

/// The delivery guarantee of a message (MQTT's QoS 0 and 1; QoS 2 is not offered).
public enum QualityOfService: Int32, Sendable, Hashable, CaseIterable {
  /// At most once: no acknowledgement.
  case atMostOnce = 0
  /// At least once: the broker acknowledges, and libmosquitto resends until it does.
  case atLeastOnce = 1
}

/// One MQTT message.
public struct MQTTMessage: Sendable, Hashable {
  /// The topic (no wildcards in a published message).
  public var topic: String
  /// The payload bytes (blekit publishes UTF-8 JSON).
  public var payload: [UInt8]
  /// The QoS it is published with, or was received with.
  public var qos: QualityOfService
  /// Whether the broker keeps it as the topic's last value.
  public var retain: Bool

  /// Creates a message.
  public init(
    topic: String, payload: [UInt8], qos: QualityOfService = .atMostOnce, retain: Bool = false
  ) {
    self.topic = topic
    self.payload = payload
    self.qos = qos
    self.retain = retain
  }

  /// Creates a message with a text payload.
  public init(
    topic: String, text: String, qos: QualityOfService = .atMostOnce, retain: Bool = false
  ) {
    self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
  }

  /// The payload as UTF-8 text.
  public var text: String { String(decoding: payload, as: UTF8.self) }
}
