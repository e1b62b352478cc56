// MQTTConfiguration: everything an MQTTClient needs before it connects.

/// How to reach and talk to a broker.
public struct MQTTConfiguration: Sendable {
  /// The broker.
  public var broker: BrokerURL
  /// The client ID (MQTT requires a unique one per connected client); `nil` lets libmosquitto
  /// make one up, which needs a clean session.
  public var clientID: String?
  /// A user name; overrides the URL's.
  public var user: String?
  /// A password; overrides the URL's.
  public var password: String?
  /// Seconds between PINGREQs; a silent broker is noticed within 1.5 times this.
  public var keepAlive: Int = 10
  /// Whether the broker forgets this client's subscriptions and queued messages when it goes.
  public var cleanSession: Bool = true
  /// The message the broker publishes when this client vanishes without disconnecting.
  public var will: MQTTMessage?
  /// A message published on every connection, first (a retained `online` that undoes the
  /// last will the broker may have published while this client was away).
  public var birth: MQTTMessage?
  /// The most messages buffered while the broker is away (the oldest is dropped beyond).
  public var bufferCapacity: Int = 10_000
  /// The most received messages held for a slow reader (the oldest is dropped beyond).
  public var receiveCapacity: Int = 10_000
  /// The most bytes of received messages held for a slow reader (payload and topic, plus 64
  /// per message; the oldest dropped beyond).
  public var receiveByteCapacity: Int = 64 << 20
  /// The largest payload received, in bytes; a larger message is dropped before its payload
  /// is copied out of libmosquitto, and counted (``MQTTStatistics/receivedTooLarge``). `nil`:
  /// no limit but the broker's. libmosquitto itself reads each whole packet (MQTT 3.1.1 has
  /// no way to ask the broker for less), one at a time.
  public var maximumPayloadSize: Int?
  /// A PEM file of certificate authorities for `mqtts://`; `nil` uses the system's
  /// (`/etc/ssl/certs`).
  public var certificateAuthorities: String?
  /// The first delay before reconnecting; it doubles up to ``maximumReconnectDelay``.
  public var reconnectDelay: Int = 1
  /// The longest delay between reconnection attempts, in seconds.
  public var maximumReconnectDelay: Int = 30
  /// How long ``MQTTClient/connect(_:)`` waits for the broker's CONNACK.
  public var connectTimeout: Duration = .seconds(5)

  /// Creates a configuration for a broker, with the defaults above.
  public init(broker: BrokerURL) {
    self.broker = broker
  }
}
