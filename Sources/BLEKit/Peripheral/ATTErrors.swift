// ATTErrors: the ATT error codes a GATT server's handlers answer with (CoreBluetooth's
// CBATTError), as BluetoothError values, and how bluetoothd is told each.
import BlueZ

extension BluetoothError.Code {
  /// An ATT error answer: what a peripheral's read or write handler throws to refuse a request
  /// (``BluetoothError/att(_:_:)``), with the ATT code in ``BluetoothError/attErrorCode``.
  public static let attError = Self(rawValue: "attError")
}

extension BluetoothError {
  /// An ATT error code (Core Vol 3 Part F 3.4.1.1), the answer a central sees.
  public struct ATTCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code's byte on the air.
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// 0x02: the attribute cannot be read.
    public static let readNotPermitted = Self(rawValue: 0x02)
    /// 0x03: the attribute cannot be written.
    public static let writeNotPermitted = Self(rawValue: 0x03)
    /// 0x06: the server does not support the request.
    public static let requestNotSupported = Self(rawValue: 0x06)
    /// 0x07: the offset is past the end of the value.
    public static let invalidOffset = Self(rawValue: 0x07)
    /// 0x08: the central is not authorized (the device's own authorization).
    public static let insufficientAuthorization = Self(rawValue: 0x08)
    /// 0x0D: the value's length is wrong for the attribute.
    public static let invalidAttributeValueLength = Self(rawValue: 0x0D)
    /// 0x0E: any other failure.
    public static let unlikelyError = Self(rawValue: 0x0E)

    /// E.g. `read not permitted (0x02)`.
    public var description: String {
      let name: String =
        switch self {
        case .readNotPermitted: "read not permitted"
        case .writeNotPermitted: "write not permitted"
        case .requestNotSupported: "request not supported"
        case .invalidOffset: "invalid offset"
        case .insufficientAuthorization: "insufficient authorization"
        case .invalidAttributeValueLength: "invalid attribute value length"
        case .unlikelyError: "unlikely error"
        default: "ATT error"
        }
      return "\(name) (0x\(HexBytes.format([rawValue])))"
    }
  }

  /// The answer a read or write handler throws to refuse a request, e.g.
  /// `throw .att(.readNotPermitted)`; `message` stays local (bluetoothd passes only the ATT
  /// code on, and answers ``ATTCode/unlikelyError`` with it).
  ///
  /// bluetoothd (BlueZ 5.66) answers a handler's refusal by its `org.bluez.Error` name:
  /// Read and Write Not Permitted both as `NotPermitted`, which it sends as the ATT error of the
  /// request's kind; a code it has no name for as `Failed`, which is Unlikely Error.
  public static func att(_ code: ATTCode, _ message: String? = nil) -> BluetoothError {
    var error = BluetoothError(.attError, message ?? code.description)
    error.att = code
    return error
  }

  /// The BlueZ request error bluetoothd turns into this error's ATT answer: the ATT code's
  /// for ``Code/attError``, Unlikely Error (with the message) for any other error a handler
  /// throws.
  var gattRequestError: GattRequestError {
    guard code == .attError, let att else { return .failed(message) }
    switch att {
    case .invalidOffset: return .invalidOffset
    case .readNotPermitted, .writeNotPermitted: return .notPermitted
    case .requestNotSupported: return .notSupported
    case .invalidAttributeValueLength: return .invalidValueLength
    case .insufficientAuthorization: return .notAuthorized
    default: return .failed(message)
    }
  }
}
