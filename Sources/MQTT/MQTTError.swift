// MQTTError: the MQTT module's one error type, with libmosquitto's reason kept in the message.

/// An error from the MQTT client: a bad URL, a broker that cannot be reached or refuses us.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What kind of failure.
  public struct Code: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The broker URL does not parse.
    public static let invalidURL = Code(rawValue: "invalidURL")
    /// A setting libmosquitto rejects (a client ID or topic it cannot use, TLS files).
    public static let invalidSetting = Code(rawValue: "invalidSetting")
    /// The broker could not be reached in time (refused, unresolvable, no answer).
    public static let unreachable = Code(rawValue: "unreachable")
    /// The broker answered CONNECT with a refusal (credentials, client ID, protocol).
    public static let refused = Code(rawValue: "refused")
  }

  /// The kind.
  public let code: Code
  /// One line saying what went wrong.
  public let message: String

  /// Creates an error.
  public init(_ code: Code, _ message: String) {
    self.code = code
    self.message = message
  }

  public var description: String { message }
}
