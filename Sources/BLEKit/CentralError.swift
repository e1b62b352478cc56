// CentralError: what the central side reports, with BlueZ's own error kept underneath.
import BlueZ

/// An error from ``CentralManager``, ``Peripheral`` and the transfer client.
///
/// The ``code`` says what went wrong in blekit's terms; ``bluez`` keeps bluetoothd's own
/// error (e.g. `org.bluez.Error.InProgress`) when there was one.
public struct CentralError: Error, Sendable, CustomStringConvertible {
  /// What went wrong, as a stable code.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// bluetoothd is not on the bus.
    public static let serviceUnavailable = Code(rawValue: "serviceUnavailable")
    /// The connection to the system bus was lost (the bus daemon stopped or restarted): the
    /// central can do nothing more; open a new one.
    public static let busLost = Code(rawValue: "busLost")
    /// The bus refused us.
    public static let unauthorized = Code(rawValue: "unauthorized")
    /// The requested adapter does not exist (or there is none).
    public static let adapterNotFound = Code(rawValue: "adapterNotFound")
    /// The adapter is powered off.
    public static let poweredOff = Code(rawValue: "poweredOff")
    /// A scan is already running on this manager.
    public static let scanInProgress = Code(rawValue: "scanInProgress")
    /// The peripheral is unknown to bluetoothd (never discovered, or removed).
    public static let peripheralNotFound = Code(rawValue: "peripheralNotFound")
    /// Connecting failed after the allowed retries.
    public static let connectionFailed = Code(rawValue: "connectionFailed")
    /// The operation did not finish in time.
    public static let timeout = Code(rawValue: "timeout")
    /// The peripheral is not connected (or disconnected during the operation).
    public static let disconnected = Code(rawValue: "disconnected")
    /// A service, characteristic or descriptor was not found.
    public static let attributeNotFound = Code(rawValue: "attributeNotFound")
    /// The characteristic does not support the operation (e.g. no `notify` flag).
    public static let notSupported = Code(rawValue: "notSupported")
    /// bluetoothd answered with an error; see ``CentralError/bluez``.
    public static let bluez = Code(rawValue: "bluez")
    /// The task was cancelled.
    public static let cancelled = Code(rawValue: "cancelled")
    /// A system call failed (e.g. reading the notification socket).
    public static let system = Code(rawValue: "system")
  }

  public var code: Code
  public var message: String
  /// bluetoothd's error, when there was one.
  public var bluez: BlueZError?

  public init(_ code: Code, _ message: String, bluez: BlueZError? = nil) {
    self.code = code
    self.message = message
    self.bluez = bluez
  }

  /// Wraps a BlueZ-layer error, keeping its meaning where blekit has a code for it.
  public init(_ error: BlueZError, while doing: String) {
    let code: Code =
      switch error.code {
      case .serviceUnavailable: .serviceUnavailable
      case .busLost: .busLost
      case .accessDenied: .unauthorized
      case .timeout: .timeout
      case .notConnected: .disconnected
      case .objectNotFound, .doesNotExist: .attributeNotFound
      case .notSupported: .notSupported
      default: .bluez
      }
    self.init(code, "\(doing): \(error.description)", bluez: error)
  }

  /// One line.
  public var description: String { message }
}
