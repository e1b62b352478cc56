// FleetError: the gateway module's one error type (the MQTT layer's errors mapped in one place).

import MQTT

/// A gateway or aggregator failure: a bad broker URL or setting, a broker that cannot be
/// reached or refuses the client.
public struct FleetError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What kind of failure.
  public enum Code: String, Sendable, Hashable {
    /// The broker URL does not parse.
    case invalidURL
    /// A setting the client library rejects (client ID, topic, TLS files).
    case invalidSetting
    /// The broker cannot be reached.
    case unreachable
    /// The broker refused the connection (credentials, client ID).
    case refused
  }

  /// The kind.
  public let code: Code
  /// One line saying what went wrong.
  public let message: String

  public init(_ code: Code, _ message: String) {
    self.code = code
    self.message = message
  }

  init(_ error: MQTTError) {
    let code: Code =
      switch error.code {
      case .invalidURL: .invalidURL
      case .unreachable: .unreachable
      case .refused: .refused
      default: .invalidSetting
      }
    self.init(code, error.message)
  }

  public var description: String { message }
}
