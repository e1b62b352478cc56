// The small error a local GATT attribute answers with; bluetoothd turns it into an ATT error.
import DBus

/// Why a local (exported) GATT attribute refuses a request from bluetoothd.
///
/// Each case becomes the D-Bus error `org.bluez.Error.<Name>`, which bluetoothd maps to an ATT
/// error code for the remote central: ``invalidOffset`` to "Invalid Offset",
/// ``invalidValueLength`` to "Invalid Attribute Value Length", ``notAuthorized`` to
/// "Insufficient Authorization", ``notSupported`` to "Request Not Supported",
/// ``notPermitted`` to "Read/Write Not Permitted", ``inProgress`` to "Procedure Already in
/// Progress" and ``failed`` to an application error.
public enum GattRequestError: Error, Sendable, Hashable, CustomStringConvertible {
  case failed(String)
  case inProgress
  case invalidOffset
  case invalidValueLength
  case notPermitted
  case notAuthorized
  case notSupported

  /// The suffix of the D-Bus error name, e.g. `InvalidOffset`.
  public var name: String {
    switch self {
    case .failed: "Failed"
    case .inProgress: "InProgress"
    case .invalidOffset: "InvalidOffset"
    case .invalidValueLength: "InvalidValueLength"
    case .notPermitted: "NotPermitted"
    case .notAuthorized: "NotAuthorized"
    case .notSupported: "NotSupported"
    }
  }

  /// The full D-Bus error name, e.g. `org.bluez.Error.InvalidOffset`.
  public var errorName: String { BlueZError.errorPrefix + name }

  public var description: String {
    if case .failed(let message) = self, !message.isEmpty { return "\(errorName): \(message)" }
    return errorName
  }

  /// The error reply the DBus layer sends back to bluetoothd.
  var dbusError: DBusError {
    let message: String
    switch self {
    case .failed(let text): message = text.isEmpty ? "Operation failed" : text
    case .inProgress: message = "In progress"
    case .invalidOffset: message = "Invalid offset"
    case .invalidValueLength: message = "Invalid value length"
    case .notPermitted: message = "Not permitted"
    case .notAuthorized: message = "Not authorized"
    case .notSupported: message = "Not supported"
    }
    return DBusError.remote(name: errorName, message: message)
  }
}
