// The ATT errors a peripheral's handlers answer with (CoreBluetooth's CBATTError).
import BlueZ

/// Why a read or write request is refused; the central sees the matching ATT error.
public enum ATTError: Error, Sendable, Hashable, CustomStringConvertible {
  /// The offset is past the end of the value.
  case invalidOffset
  case readNotPermitted
  case writeNotPermitted
  case requestNotSupported
  case invalidAttributeValueLength
  case insufficientAuthorization
  /// Any other failure; the text stays local (bluetoothd answers an application error).
  case unlikelyError(String)

  public var description: String {
    switch self {
    case .invalidOffset: "invalid offset"
    case .readNotPermitted: "read not permitted"
    case .writeNotPermitted: "write not permitted"
    case .requestNotSupported: "request not supported"
    case .invalidAttributeValueLength: "invalid attribute value length"
    case .insufficientAuthorization: "insufficient authorization"
    case .unlikelyError(let text): text.isEmpty ? "unlikely error" : text
    }
  }

  /// The BlueZ request error bluetoothd turns into this ATT error.
  var gattRequestError: GattRequestError {
    switch self {
    case .invalidOffset: .invalidOffset
    case .readNotPermitted, .writeNotPermitted: .notPermitted
    case .requestNotSupported: .notSupported
    case .invalidAttributeValueLength: .invalidValueLength
    case .insufficientAuthorization: .notAuthorized
    case .unlikelyError(let text): .failed(text)
    }
  }
}
