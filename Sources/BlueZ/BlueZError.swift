// Errors in BlueZ's own vocabulary: one code per org.bluez.Error.* name, plus blekit's own.
import DBus

/// An error from bluetoothd, from the bus, or raised by blekit's BlueZ layer itself.
///
/// Remote errors keep BlueZ's names: `org.bluez.Error.InProgress` becomes ``Code/inProgress``;
/// a name blekit does not know is kept verbatim in ``name`` with the code ``Code/other``.
public struct BlueZError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong, as a stable code.
  public struct Code: RawRepresentable, Hashable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    // org.bluez.Error.* (the suffix is the raw value)
    public static let failed = Code(rawValue: "Failed")
    public static let inProgress = Code(rawValue: "InProgress")
    public static let notPermitted = Code(rawValue: "NotPermitted")
    public static let notAuthorized = Code(rawValue: "NotAuthorized")
    public static let invalidOffset = Code(rawValue: "InvalidOffset")
    public static let invalidValueLength = Code(rawValue: "InvalidValueLength")
    public static let invalidArguments = Code(rawValue: "InvalidArguments")
    public static let notSupported = Code(rawValue: "NotSupported")
    public static let notConnected = Code(rawValue: "NotConnected")
    public static let alreadyConnected = Code(rawValue: "AlreadyConnected")
    public static let alreadyExists = Code(rawValue: "AlreadyExists")
    public static let doesNotExist = Code(rawValue: "DoesNotExist")
    public static let notReady = Code(rawValue: "NotReady")
    public static let notAvailable = Code(rawValue: "NotAvailable")
    public static let authenticationFailed = Code(rawValue: "AuthenticationFailed")
    public static let authenticationCanceled = Code(rawValue: "AuthenticationCanceled")
    public static let authenticationRejected = Code(rawValue: "AuthenticationRejected")
    public static let authenticationTimeout = Code(rawValue: "AuthenticationTimeout")
    public static let connectionAttemptFailed = Code(rawValue: "ConnectionAttemptFailed")
    public static let canceled = Code(rawValue: "Canceled")
    /// An org.bluez.Error name blekit has no constant for; see ``BlueZError/name``.
    public static let other = Code(rawValue: "Other")

    // Raised by blekit itself, never by bluetoothd.
    /// bluetoothd does not own `org.bluez` on the bus (not running, or gone).
    public static let serviceUnavailable = Code(rawValue: "blekit.ServiceUnavailable")
    /// The system bus refused us (policy or permissions).
    public static let accessDenied = Code(rawValue: "blekit.AccessDenied")
    /// No adapter with the requested name exists.
    public static let adapterNotFound = Code(rawValue: "blekit.AdapterNotFound")
    /// An object (device, service, characteristic) vanished or was never there.
    public static let objectNotFound = Code(rawValue: "blekit.ObjectNotFound")
    /// A property was missing or had an unexpected D-Bus type.
    public static let unexpectedValue = Code(rawValue: "blekit.UnexpectedValue")
    /// The operation did not finish in time.
    public static let timeout = Code(rawValue: "blekit.Timeout")
    /// The bus connection failed, or a call was refused before it was sent.
    public static let bus = Code(rawValue: "blekit.Bus")
    /// The connection to the system bus is closed or was lost (the bus daemon stopped or
    /// restarted): nothing more can be sent or received on it.
    public static let busLost = Code(rawValue: "blekit.BusLost")
  }

  public var code: Code
  /// The full D-Bus error name when the error came from the bus, e.g. `org.bluez.Error.Failed`.
  public var name: String?
  public var message: String

  public init(_ code: Code, _ message: String, name: String? = nil) {
    self.code = code
    self.message = message
    self.name = name
  }

  /// One line: the BlueZ name (or code) and the message.
  public var description: String {
    let label = name ?? code.rawValue
    return message.isEmpty ? label : "\(label): \(message)"
  }

  /// The prefix shared by all of BlueZ's error names.
  public static let errorPrefix = "org.bluez.Error."

  /// Maps a D-Bus error into BlueZ's vocabulary.
  public init(_ error: DBusError) {
    switch error.code {
    case .remote:
      let name = error.name ?? ""
      if name.hasPrefix(Self.errorPrefix) {
        let suffix = String(name.dropFirst(Self.errorPrefix.count))
        let known = Code(rawValue: suffix)
        self.init(Self.knownCodes.contains(known) ? known : .other, error.message, name: name)
      } else if name == "org.freedesktop.DBus.Error.ServiceUnknown"
        || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
        // The bus tried to start bluetoothd by D-Bus activation and failed (dbus-daemon's
        // Spawn.ChildExited and kin, when bluetoothd is stopped and cannot start).
        || name.hasPrefix("org.freedesktop.DBus.Error.Spawn.")
      {
        self.init(
          .serviceUnavailable, "bluetoothd is not running (org.bluez is not on the bus)", name: name
        )
      } else if name == "org.freedesktop.DBus.Error.AccessDenied" {
        self.init(.accessDenied, error.message, name: name)
      } else if name == "org.freedesktop.DBus.Error.UnknownObject"
        || name == "org.freedesktop.DBus.Error.UnknownMethod"
      {
        self.init(.objectNotFound, error.message, name: name)
      } else if name == "org.freedesktop.DBus.Error.NoReply" {
        self.init(.timeout, error.message, name: name)
      } else {
        self.init(.other, error.message, name: name.isEmpty ? nil : name)
      }
    case .timeout, .noReply:
      self.init(.timeout, error.message)
    case .disconnected:
      self.init(.busLost, error.message)
    default:
      self.init(.bus, error.description)
    }
  }

  static let knownCodes: Set<Code> = [
    .failed, .inProgress, .notPermitted, .notAuthorized, .invalidOffset, .invalidValueLength,
    .invalidArguments, .notSupported, .notConnected, .alreadyConnected, .alreadyExists,
    .doesNotExist, .notReady, .notAvailable, .authenticationFailed, .authenticationCanceled,
    .authenticationRejected, .authenticationTimeout, .connectionAttemptFailed, .canceled,
  ]
}
