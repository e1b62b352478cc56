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
