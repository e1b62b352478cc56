// Indications that wait for the central's confirmation (ATT Handle Value Confirmation), which
// bluetoothd reports by calling the characteristic's `Confirm`.
import BlueZ
import Bluetooth

extension BluetoothError.Code {
  /// A central did not confirm an indication in time.
  public static let notConfirmed = Self(rawValue: "notConfirmed")
}

extension PeripheralManager {
  /// How long ``indicate(_:for:timeout:)`` waits by default: ATT's own transaction timeout
  /// (Core Vol 3 Part F 3.3.3), after which the central's link is considered failed anyway.
  public static let indicationTimeout: Duration = .seconds(30)

  /// Sends `value` as an indication on `characteristic` (which has
  /// ``CharacteristicProperties/indicate``) and returns once a central confirmed it.
  ///
  /// bluetoothd indicates every subscribed central and calls the characteristic's `Confirm`
  /// for each confirmation, without saying which central confirmed (BlueZ 5.66); this returns
  /// on the first confirmation. Concurrent calls are matched to confirmations in order.
  /// - Throws: ``BluetoothError/Code/notConfirmed`` when no confirmation came within `timeout`
  ///   (the value may still have reached the central; ATT allows one outstanding indication,
  ///   so a central that never confirms blocks later ones);
  ///   ``BluetoothError/Code/notSubscribed`` when nobody is (or stays) subscribed;
  ///   ``BluetoothError/Code/valueTooLong``; ``BluetoothError/Code/notSupported`` for a
  ///   characteristic without `.indicate`; ``BluetoothError/Code/closed``.
  public func indicate(
    _ value: [UInt8], for characteristic: MutableCharacteristic,
    timeout: Duration = PeripheralManager.indicationTimeout
  ) async throws(BluetoothError) {
    guard characteristic.properties.contains(.indicate) else {
      throw BluetoothError(
        .notSupported, "characteristic \(characteristic.uuid) does not have the indicate property")
    }
    let channel = try channel(for: characteristic)
    let maximum = channel.maximumUpdateValueLength
    guard value.count <= maximum else {
      throw .valueTooLong(length: value.count, maximum: maximum)
    }
    switch await channel.indicate(value, timeout: timeout) {
    case .confirmed:
      return
    case .timedOut:
      throw BluetoothError(
        .notConfirmed,
        "no central confirmed the indication on \(characteristic.uuid) within "
          + "\(timeout.components.seconds) s")
    case .unsubscribed:
      throw .notSubscribed(characteristic.uuid)
    case .closed, .cancelled:
      throw .closed
    case .failed(let message):
      throw BluetoothError(.bus, "cannot send the indication: \(message)")
    }
  }
}
