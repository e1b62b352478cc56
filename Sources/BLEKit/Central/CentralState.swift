// CentralState: whether the central can work right now, in CoreBluetooth's terms.

/// The state of a ``CentralManager``'s adapter and of bluetoothd, as in CoreBluetooth's
/// `CBManagerState`.
public enum CentralState: String, Sendable, Hashable, CustomStringConvertible {
  /// The adapter exists and is powered: scanning and connecting work.
  case poweredOn
  /// The adapter exists but is switched off (`Adapter1.Powered` is false).
  case poweredOff
  /// The system bus refused to let us talk to bluetoothd (D-Bus policy).
  case unauthorized
  /// bluetoothd runs but the chosen adapter does not exist (no controller at all, or not the
  /// named one).
  case unsupported
  /// bluetoothd does not own `org.bluez` on the system bus (not running, or restarting).
  case serviceUnavailable

  /// One line for messages.
  public var description: String {
    switch self {
    case .poweredOn: "powered on"
    case .poweredOff: "powered off"
    case .unauthorized: "not authorized to use bluetoothd"
    case .unsupported: "no such Bluetooth adapter"
    case .serviceUnavailable: "bluetoothd is not running"
    }
  }
}
