// The errors of the peripheral side, each one line.
import BlueZ
import Bluetooth

/// An error of ``PeripheralManager``.
public enum PeripheralManagerError: Error, Sendable, CustomStringConvertible {
  /// bluetoothd or the bus refused or failed; the error's code says how.
  case bluetoothd(CentralError)
  /// The advertisement does not fit; the text says which fields take how many bytes.
  case advertisementTooLarge(String)
  /// The characteristic was never added to this manager (or its service was removed).
  case unknownCharacteristic(BluetoothUUID)
  /// Nobody is subscribed to the characteristic (any more).
  case notSubscribed(BluetoothUUID)
  /// The value is longer than one notification can carry for the current subscribers.
  case valueTooLong(length: Int, maximum: Int)
  /// The manager was closed.
  case closed

  public var description: String {
    switch self {
    case .bluetoothd(let error): error.message
    case .advertisementTooLarge(let report): report
    case .unknownCharacteristic(let uuid): "characteristic \(uuid) is not published by this manager"
    case .notSubscribed(let uuid): "no central is subscribed to characteristic \(uuid)"
    case .valueTooLong(let length, let maximum):
      "a \(length)-byte value does not fit in one notification (at most \(maximum) bytes)"
    case .closed: "the peripheral manager is closed"
    }
  }
}

extension PeripheralManagerError {
  /// bluetoothd's or the bus's error, as BLEKit reports it.
  package static func bluez(_ error: BlueZError) -> PeripheralManagerError {
    .bluetoothd(CentralError(error))
  }
}
