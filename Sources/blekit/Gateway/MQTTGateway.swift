// The glue from `scan` and `monitor` to the Fleet publisher: the --mqtt options both declare,
// turning them into GatewaySettings, and publishing each discovery (one place to re-point
// when the scan API changes).

import ArgumentParsing
import BLEKit
import Fleet

#if canImport(Glibc)
  import Glibc
#endif

extension PayloadLayout: ExpressibleByArgument {}

/// The --mqtt options of a command that publishes its sightings.
protocol GatewayArguments: ArgumentList {
  var mqtt: Option<String> { get }
  var mqttUser: Option<String> { get }
  var mqttPassword: Option<String> { get }
  var mqttClientID: Option<String> { get }
  var mqttQoS: Option<Int> { get }
  var mqttCA: Option<String> { get }
  var mqttPrefix: Option<String> { get }
  var mqttLayout: Option<PayloadLayout> { get }
  var mqttInterval: Option<Duration> { get }
  var mqttBuffer: Option<Int> { get }
  var gateway: Option<String> { get }
  var homeAssistant: Flag { get }
}

/// The declarations, written once for both commands.
enum GatewayOptions {
  static var mqtt: Option<String> {
    Option(
      "--mqtt", value: "URL",
      help: "Also publish sightings to this broker: mqtt://[USER[:PASS]@]HOST[:PORT] or mqtts://.")
  }
  static var user: Option<String> {
    Option("--mqtt-user", value: "NAME", help: "Broker user name (overrides the URL's).")
  }
  static var password: Option<String> {
    Option("--mqtt-password", value: "TEXT", help: "Broker password (overrides the URL's).")
  }
  static var clientID: Option<String> {
    Option("--mqtt-client-id", value: "ID", help: "MQTT client ID (default blekit-GATEWAY).")
  }
  static var qos: Option<Int> {
    Option("--mqtt-qos", value: "0|1", help: "QoS of published messages (default 0).")
  }
  static var ca: Option<String> {
    Option("--mqtt-ca", value: "FILE", help: "mqtts://: CA certificates, PEM (default: system).")
  }
  static var prefix: Option<String> {
    Option(
      "--mqtt-prefix", value: "TOPIC",
      help: "Topic prefix (default blekit/GATEWAY; home/GATEWAY with --mqtt-layout theengs).")
  }
  static var layout: Option<PayloadLayout> {
    Option(
      "--mqtt-layout", value: "LAYOUT",
      help: "blekit (default) or theengs (Theengs Gateway's BTtoMQTT topics and fields).")
  }
  static var interval: Option<Duration> {
    Option(
      "--mqtt-interval", value: "SECONDS",
      help: "Publish an unchanged device again after this long (default 10; 0: every report).")
  }
  static var buffer: Option<Int> {
    Option(
      "--mqtt-buffer", value: "N",
      help: "Messages kept while the broker is away (default 10000; oldest dropped, counted).")
  }
  static var gateway: Option<String> {
    Option(
      "--gateway", value: "NAME",
      help: "This gateway's name in topics and payloads (default: host name).")
  }
  static var homeAssistant: Flag {
    Flag("--home-assistant", help: "Publish Home Assistant MQTT discovery for each monitored ID.")
  }

  /// The settings the options ask for, or `nil` without --mqtt.
  static func settings<A: GatewayArguments>(_ arguments: ParsedArguments<A>) throws(UsageError)
    -> GatewaySettings?
  {
    guard let url = arguments.mqtt else {
      let given = [
        arguments.mqttUser, arguments.mqttPassword, arguments.mqttClientID, arguments.mqttCA,
        arguments.mqttPrefix, arguments.gateway,
      ].contains { $0 != nil }
      if given || arguments.mqttQoS != nil || arguments.mqttLayout != nil
        || arguments.mqttInterval != nil || arguments.mqttBuffer != nil || arguments.homeAssistant
      {
        throw .invalid("the --mqtt-... options, --gateway and --home-assistant need --mqtt URL")
      }
      return nil
    }
    var broker = BrokerSettings(url: url)
    broker.user = arguments.mqttUser
    broker.password = arguments.mqttPassword
    broker.clientID = arguments.mqttClientID
    broker.certificateAuthorities = arguments.mqttCA
    if let qos = arguments.mqttQoS {
      guard qos == 0 || qos == 1 else { throw .invalid("--mqtt-qos must be 0 or 1") }
      broker.qos = qos
    }
    if let buffer = arguments.mqttBuffer {
      guard buffer >= 1 else { throw .invalid("--mqtt-buffer must be at least 1") }
      broker.bufferCapacity = buffer
    }
    do throws(FleetError) {
      try broker.validate()
    } catch {
      throw .invalid("--mqtt: \(error.message)")
    }
    let gateway = arguments.gateway ?? hostName()
    guard TopicLayout.isSegment(gateway), gateway.allSatisfy({ $0.isASCII && !$0.isWhitespace })
    else {
      throw .invalid("--gateway must be ASCII without spaces, '/', '+' or '#'")
    }
    if let prefix = arguments.mqttPrefix, !TopicLayout.isPrefix(prefix) {
      throw .invalid("--mqtt-prefix must be topic levels without '+', '#' or empty levels")
    }
    let topics = TopicLayout(
      layout: arguments.mqttLayout ?? .blekit, gateway: gateway, prefix: arguments.mqttPrefix)
    var settings = GatewaySettings(
      broker: broker, origin: GatewayOrigin(gateway: gateway, adapter: ""), topics: topics)
    if let interval = arguments.mqttInterval {
      guard interval >= .zero else { throw .invalid("--mqtt-interval must be 0 or more seconds") }
      settings.interval = interval
    }
    settings.homeAssistant = arguments.homeAssistant
    return settings
  }

  /// The host name, made usable as a topic segment.
  static func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "gateway" }
    let name = String(
      decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let cleaned = String(
      name.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") ? $0 : "_" })
    return cleaned.isEmpty ? "gateway" : cleaned
  }
}

/// A running publisher for a scan or monitor: connects at the start (a broker that cannot be
/// reached ends the command with exit status 14), says on standard error when the broker goes
/// and comes back and when messages are dropped, and prints the counts at the end.
final class MQTTGateway: Sendable {
  let publisher: GatewayPublisher
  private let eventTask: Task<Void, Never>

  /// Connects; `adapter` goes into every payload.
  static func start(_ settings: GatewaySettings?, adapter: String) async throws -> MQTTGateway? {
    guard var settings else { return nil }
    settings.origin.adapter = adapter
    do throws(FleetError) {
      let publisher = try await GatewayPublisher.connect(settings)
      if standardErrorIsTerminal {
        writeStandardError(
          "mqtt: publishing to \(publisher.broker) under \(settings.topics.prefix)\n")
      }
      return MQTTGateway(publisher: publisher)
    } catch {
      throw exitError(error)
    }
  }

  private init(publisher: GatewayPublisher) {
    self.publisher = publisher
    let broker = publisher.broker
    eventTask = Task {
      for await event in publisher.events {
        writeStandardError(brokerEventLine(event, broker: broker) + "\n")
      }
    }
  }

  /// Publishes a discovery (rate limited); `id` is the monitored ID it is a sighting of, if
  /// any, else the FolkBears ID it carries.
  func publish(_ discovery: Discovery, id: String? = nil) {
    let report = AdvertisementReport(discovery)
    publisher.publish(report, id: id ?? report.folkBearsID, at: discovery.timestamp)
  }

  /// Flushes, disconnects and prints the counts on standard error.
  func finish() async {
    let report = await publisher.close()
    eventTask.cancel()
    var line = report.line + ", \(publisher.suppressed) held back by --mqtt-interval"
    let cleared = publisher.homeAssistantCleared
    let retained = publisher.homeAssistantConfigs
    if cleared > 0 || retained > 0 {
      line += ", \(retained) Home Assistant configs retained, \(cleared) cleared"
    }
    writeStandardError(line + "\n")
  }
}
