// BrokerURL: where an MQTT broker is, from `mqtt://[user[:password]@]host[:port]` or `mqtts://`.

/// A broker address parsed from a URL: scheme, host, port and optional credentials.
///
/// `mqtt://` is plain TCP (port 1883 by default), `mqtts://` is TLS (port 8883 by default).
/// A user and password in the URL are percent-decoded. A path other than `/` is rejected: MQTT
/// has no paths, and a topic given there would be silently ignored.
public struct BrokerURL: Sendable, Hashable, CustomStringConvertible {
  /// The broker's host name or address (an IPv6 address without its brackets).
  public var host: String
  /// The TCP port.
  public var port: Int
  /// Whether the connection uses TLS (`mqtts://`).
  public var usesTLS: Bool
  /// The user name from the URL, if any.
  public var user: String?
  /// The password from the URL, if any.
  public var password: String?

  /// Parses a broker URL; throws ``MQTTError`` (`.invalidURL`) with a one-line reason.
  public init(_ text: String) throws(MQTTError) {
    let schemes: [(String, Bool, Int)] = [("mqtt://", false, 1883), ("mqtts://", true, 8883)]
    guard let (prefix, tls, defaultPort) = schemes.first(where: { text.hasPrefix($0.0) }) else {
      throw MQTTError(.invalidURL, "'\(text)' is not an mqtt:// or mqtts:// URL")
    }
    var rest = Substring(text.dropFirst(prefix.count))
    if rest.hasSuffix("/") { rest = rest.dropLast() }
    guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
      throw MQTTError(.invalidURL, "'\(text)': an MQTT URL has no path, query or fragment")
    }
    var user: String?
    var password: String?
    if let at = rest.lastIndex(of: "@") {
      let credentials = rest[..<at]
      rest = rest[rest.index(after: at)...]
      if let colon = credentials.firstIndex(of: ":") {
        user = try Self.percentDecoded(credentials[..<colon], in: text)
        password = try Self.percentDecoded(
          credentials[credentials.index(after: colon)...], in: text)
      } else {
        user = try Self.percentDecoded(credentials, in: text)
      }
      if user?.isEmpty == true { throw MQTTError(.invalidURL, "'\(text)': empty user name") }
    }
    var host = rest
    var portText: Substring?
    if rest.hasPrefix("[") {
      guard let close = rest.firstIndex(of: "]") else {
        throw MQTTError(.invalidURL, "'\(text)': unclosed [ in the host")
      }
      host = rest[rest.index(after: rest.startIndex)..<close]
      let after = rest[rest.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":") else {
          throw MQTTError(.invalidURL, "'\(text)': expected :PORT after the address")
        }
        portText = after.dropFirst()
      }
    } else if let colon = rest.lastIndex(of: ":") {
      host = rest[..<colon]
      portText = rest[rest.index(after: colon)...]
    }
    guard !host.isEmpty else { throw MQTTError(.invalidURL, "'\(text)': no host") }
    var port = defaultPort
    if let portText {
      guard let value = Int(portText), (1...65535).contains(value) else {
        throw MQTTError(.invalidURL, "'\(text)': the port must be a number from 1 to 65535")
      }
      port = value
    }
    self.host = String(host)
    self.port = port
    self.usesTLS = tls
    self.user = user
    self.password = password
  }

  /// The URL without its password (for messages and logs).
  public var description: String {
    let scheme = usesTLS ? "mqtts" : "mqtt"
    let who = user.map { "\($0)@" } ?? ""
    let hostPart = host.contains(":") ? "[\(host)]" : host
    return "\(scheme)://\(who)\(hostPart):\(port)"
  }

  private static func percentDecoded(_ text: Substring, in url: String) throws(MQTTError)
    -> String
  {
    var bytes: [UInt8] = []
    var iterator = Array(text.utf8).makeIterator()
    while let byte = iterator.next() {
      guard byte == UInt8(ascii: "%") else {
        bytes.append(byte)
        continue
      }
      guard let high = iterator.next().flatMap(hexValue),
        let low = iterator.next().flatMap(hexValue)
      else {
        throw MQTTError(.invalidURL, "'\(url)': a % in the credentials must start %XX")
      }
      bytes.append(high << 4 | low)
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
