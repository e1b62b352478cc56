// What bluetoothd says only in an error's text, not in its name: read here and nowhere else.

extension BlueZError {
  /// The ATT error code a peer answered one of bluetoothd's GATT requests with, when bluetoothd
  /// passed it on only as text; `nil` for every other error.
  ///
  /// BlueZ's `src/gatt-client.c` (`create_gatt_dbus_error`, the same from BlueZ 5.4x through
  /// 5.66 and 5.82) names a few ATT errors of a failed `ReadValue`/`WriteValue`
  /// itself: Read and Write Not Permitted and the security ones as `NotPermitted`, Invalid
  /// Offset and Invalid Attribute Value Length as `InvalidArguments`, Insufficient Authorization
  /// as `NotAuthorized`, Request Not Supported as `NotSupported`. Every other code comes as
  /// `org.bluez.Error.Failed` with the text "Operation failed with ATT error: 0x%02x" (e.g.
  /// 0x01 Invalid Handle, 0x0b Attribute Not Long): no error name carries it.
  public var attErrorCode: UInt8? {
    guard code == .failed, message.hasPrefix(Self.attErrorText) else { return nil }
    let digits = message.dropFirst(Self.attErrorText.count).prefix(2)
    guard digits.count == 2 else { return nil }
    return UInt8(digits, radix: 16)
  }

  /// The ATT error a refused GATT read or write stands for, from bluetoothd's error name and,
  /// where several ATT errors share a name, its text (`create_gatt_dbus_error`, as for
  /// ``attErrorCode``): `NotPermitted` "Read not permitted" is 0x02, "Write not permitted"
  /// 0x03 and "Not paired" 0x05 (bluetoothd says the same for 0x0c and 0x0f); `NotAuthorized`
  /// 0x08; `NotSupported` 0x06; `InvalidArguments` "Invalid offset" 0x07 and "Invalid Length"
  /// 0x0d; `Failed` the code in its text. `nil` for any other error. Meaningful only for the
  /// answer to a `ReadValue` or `WriteValue`.
  public var gattATTErrorCode: UInt8? {
    if let code = attErrorCode { return code }
    let text = message.lowercased()
    switch code {
    case .notPermitted:
      if text.contains("read not permitted") { return 0x02 }
      if text.contains("write not permitted") { return 0x03 }
      return text.contains("not paired") ? 0x05 : nil
    case .notAuthorized: return 0x08
    case .notSupported: return 0x06
    case .invalidArguments:
      if text.contains("invalid offset") { return 0x07 }
      return text.contains("invalid length") ? 0x0D : nil
    default: return nil
    }
  }

  /// bluetoothd's error as its D-Bus name (`org.bluez.Error.NotPermitted`, or `nil` when there
  /// was none) and its text, as an exploration's results keep it.
  public init(name: String?, message: String) {
    let suffix = name.flatMap {
      $0.hasPrefix(Self.errorPrefix)
        ? Code(rawValue: String($0.dropFirst(Self.errorPrefix.count))) : nil
    }
    self.init(
      suffix.map { Self.knownCodes.contains($0) ? $0 : .other } ?? .other, message, name: name)
  }

  /// The text before the ATT error code's two hex digits (see ``attErrorCode``).
  static let attErrorText = "Operation failed with ATT error: 0x"

  /// Whether a failed `Device1.Connect` is worth another attempt by its text: an LE link that
  /// was aborted while being set up, a refused connection, or an attempt that timed out.
  ///
  /// bluetoothd answers every such failure with `org.bluez.Error.Failed` and says which in the
  /// text only. BlueZ 5.66 and later put the reason of `src/error.c`'s
  /// `btd_error_le_conn_from_errno` there ("le-connection-abort-by-local", a known race of BlueZ and the
  /// controller; "le-connection-abort-by-remote"; "le-connection-timeout"); older bluetoothd put
  /// `strerror`'s text there ("Software caused connection abort", "Connection refused",
  /// "Connection timed out"). An error name blekit does not know (``Code/other``) is read the
  /// same way.
  public var isTransientConnectFailure: Bool {
    guard code == .failed || code == .other else { return false }
    let text = message.lowercased()
    return Self.transientConnectFailureTexts.contains { text.contains($0) }
  }

  /// Lowercased pieces of the texts ``isTransientConnectFailure`` accepts.
  static let transientConnectFailureTexts = [
    "abort-by-local", "connection abort", "le-connection-abort", "connection refused",
    "connect-failed", "timeout", "timed out",
  ]
}
