// Who is subscribed to a published characteristic, as far as bluetoothd says, and why a value
// cannot be sent to chosen centrals only.
import Bluetooth

/// What is known of a characteristic's subscribers.
///
/// BlueZ 5.66 tells a GATT server when the first central subscribes (`StartNotify`, naming
/// nobody, or `AcquireNotify`, naming that central) and when the last one leaves (`StopNotify`
/// or the socket's hang-up); the centrals in between are not reported, and each value goes to
/// every subscribed central.
public struct CharacteristicSubscribers: Sendable, Hashable {
  /// True while at least one central is subscribed.
  public let isSubscribed: Bool
  /// The centrals bluetoothd named: at most the first subscriber, when it subscribed through
  /// `AcquireNotify` (the default for notify characteristics, see
  /// ``MutableCharacteristic/usesNotifySocket``).
  public let known: [Central]
  /// Whether ``known`` is every subscriber; always false with BlueZ 5.66, which reports only
  /// the first one.
  public let isComplete: Bool
}

extension PeripheralManager {
  /// What bluetoothd said about who is subscribed to `characteristic` (see
  /// ``CharacteristicSubscribers`` for the limits of BlueZ 5.66).
  public func subscribers(of characteristic: MutableCharacteristic) -> CharacteristicSubscribers {
    guard let channel = try? channel(for: characteristic) else {
      return CharacteristicSubscribers(isSubscribed: false, known: [], isComplete: true)
    }
    let subscribed = channel.isSubscribed
    let first = subscribed ? channel.firstSubscriber : nil
    return CharacteristicSubscribers(
      isSubscribed: subscribed, known: first.map { [$0] } ?? [], isComplete: !subscribed)
  }

  /// Sends `value` only to `centrals` (CoreBluetooth's
  /// `updateValue(_:for:onSubscribedCentrals:)` with a list).
  ///
  /// Not supported: BlueZ 5.66 sends a characteristic's value to every subscribed central
  /// (`PropertiesChanged(Value)` or the one shared `AcquireNotify` socket); per-device
  /// notification sockets came with BlueZ 5.69, and blekit does not use them yet. Rather than
  /// broadcast silently, this always throws; pass no list (``updateValue(_:for:)``) to send to
  /// all.
  /// - Throws: ``BluetoothError/Code/notSupported``, naming the BlueZ version needed;
  ///   ``BluetoothError/Code/attributeNotFound`` for a characteristic not published here.
  public func updateValue(
    _ value: [UInt8], for characteristic: MutableCharacteristic,
    onSubscribedCentrals centrals: [Central]
  ) throws(BluetoothError) -> Bool {
    _ = try channel(for: characteristic)
    throw BluetoothError(
      .notSupported,
      "notifying only \(centrals.count == 1 ? "one chosen central" : "chosen centrals") is not "
        + "supported by this BlueZ: bluetoothd 5.66 sends \(characteristic.uuid)'s values to "
        + "every subscribed central (per-device notification needs BlueZ 5.69's AcquireNotify, "
        + "which blekit does not use yet); send without a list to notify all")
  }
}
