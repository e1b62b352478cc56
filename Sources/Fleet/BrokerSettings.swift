// BrokerSettings: how a gateway or the aggregator reaches its broker (the command line's
// --mqtt, --mqtt-user, ... options), and the connection events both report.

import MQTT

#if canImport(Glibc)
  import Glibc
#endif

/// The broker connection options.
public struct BrokerSettings: Sendable, Hashable {
  /// `mqtt://[user[:password]@]host[:port]` or `mqtts://...`.
  public var url: String
  /// A user name (overrides the URL's).
  public var user: String?
  /// A password (overrides the URL's).
  public var password: String?
  /// The MQTT client ID; each connected client needs its own.
  public var clientID: String?
  /// 0 (at most once) or 1 (at least once).
  public var qos: Int = 0
  /// For `mqtts://`: a PEM file of certificate authorities (default: the system's).
  public var certificateAuthorities: String?
  /// Messages buffered while the broker is away.
  public var bufferCapacity: Int = 10_000
  /// How long to wait for the broker at the start.
  public var connectTimeout: Duration = .seconds(5)
  /// Received messages held for a slow reader (the oldest dropped beyond, counted).
  public var receiveCapacity: Int = 10_000
  /// Bytes of received messages held for a slow reader (the oldest dropped beyond, counted).
  public var receiveByteCapacity: Int = 64 << 20
  /// The largest payload received, in bytes (larger ones dropped unread, counted); `nil`: no
  /// limit.
  public var maximumPayloadSize: Int?

  public init(url: String) {
    self.url = url
  }

  /// Checks the settings before any connection: the URL (``FleetError`` `.invalidURL`), the
  /// QoS, and that a CA file is readable and given for `mqtts://` only (`.invalidSetting`),
  /// each with a one-line reason.
  public func validate() throws(FleetError) {
    let broker: BrokerURL
    do throws(MQTTError) {
      broker = try BrokerURL(url)
    } catch {
      throw FleetError(error)
    }
    guard qos == 0 || qos == 1 else { throw FleetError(.invalidSetting, "QoS must be 0 or 1") }
    if let certificateAuthorities {
      guard broker.usesTLS else {
        throw FleetError(.invalidSetting, "a CA file applies to mqtts:// URLs only")
      }
      guard Syscall.access(certificateAuthorities, R_OK) == 0 else {
        throw FleetError(
          .invalidSetting,
          "cannot read the CA file \(certificateAuthorities): \(String(cString: strerror(errno)))")
      }
    }
  }

  /// The broker URL without its password.
  public var displayURL: String { (try? BrokerURL(url))?.description ?? url }

  func configuration(
    will: MQTTMessage?, birth: MQTTMessage? = nil, cleanSession: Bool = true
  ) throws(FleetError) -> MQTTConfiguration {
    try validate()
    var configuration: MQTTConfiguration
    do throws(MQTTError) {
      configuration = MQTTConfiguration(broker: try BrokerURL(url))
    } catch {
      throw FleetError(error)
    }
    configuration.clientID = clientID
    configuration.user = user
    configuration.password = password
    configuration.will = will
    configuration.birth = birth
    configuration.cleanSession = cleanSession
    configuration.certificateAuthorities = certificateAuthorities
    configuration.bufferCapacity = bufferCapacity
    configuration.connectTimeout = connectTimeout
    configuration.receiveCapacity = receiveCapacity
    configuration.receiveByteCapacity = receiveByteCapacity
    configuration.maximumPayloadSize = maximumPayloadSize
    return configuration
  }

  var qualityOfService: QualityOfService { qos == 1 ? .atLeastOnce : .atMostOnce }
}

/// What happened to a broker connection.
public enum BrokerEvent: Sendable, Hashable {
  /// Connected again after a loss.
  case reconnected
  /// The connection was lost; reconnecting with backoff.
  case lost(reason: String)
  /// The broker refused a reconnection.
  case refused(reason: String)
  /// The outgoing buffer overflowed: messages dropped so far.
  case dropped(total: Int)

  init?(_ event: MQTTEvent) {
    switch event {
    case .connected(let again): if again { self = .reconnected } else { return nil }
    case .disconnected(let reason): self = .lost(reason: reason)
    case .refused(let reason): self = .refused(reason: reason)
    case .dropped(let total): self = .dropped(total: total)
    }
  }
}

/// Counts of one broker connection, for the end-of-run line.
public struct BrokerReport: Sendable, Hashable {
  /// Messages offered for publication.
  public var offered: Int
  /// Messages handed to the connection.
  public var sent: Int
  /// Messages dropped because the buffer was full while the broker was away.
  public var dropped: Int
  /// Messages not sent or not acknowledged when the run ended.
  public var unsent: Int
  /// Reconnections after a loss.
  public var reconnections: Int
  /// Messages received (the aggregator).
  public var received: Int
  /// Received messages dropped unread for their size (the aggregator).
  public var tooLarge: Int
  /// Received messages still waiting to be read when the connection closed (the aggregator).
  public var unread: Int

  init(_ statistics: MQTTStatistics) {
    offered = statistics.offered
    sent = statistics.handedOver
    dropped = statistics.dropped + statistics.receivedDropped
    unsent = statistics.buffered + statistics.inFlight
    reconnections = statistics.reconnections
    received = statistics.received
    tooLarge = statistics.receivedTooLarge
    unread = statistics.receivedWaiting
  }

  /// `mqtt: 120 published, 0 dropped, 0 unsent, 1 reconnection`.
  public var line: String {
    var parts = ["\(offered) published", "\(dropped) dropped", "\(unsent) unsent"]
    parts.append("\(reconnections) reconnection\(reconnections == 1 ? "" : "s")")
    if received > 0 { parts.append("\(received) received") }
    if tooLarge > 0 { parts.append("\(tooLarge) too large") }
    if unread > 0 { parts.append("\(unread) unread") }
    return "mqtt: " + parts.joined(separator: ", ")
  }
}

/// A one-line description of an event for standard error.
public func brokerEventLine(_ event: BrokerEvent, broker: String) -> String {
  switch event {
  case .reconnected: "mqtt: reconnected to \(broker)"
  case .lost(let reason): "mqtt: lost \(broker) (\(reason)); reconnecting with backoff, buffering"
  case .refused(let reason): "mqtt: \(broker) refused the reconnection: \(reason)"
  case .dropped(let total):
    "mqtt: buffer full while the broker is away: \(total) message\(total == 1 ? "" : "s") dropped so far"
  }
}
