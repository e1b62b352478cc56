// What a PeripheralManager reports: subscriptions, writes, readiness, advertising ending.
import Bluetooth

/// An event of a ``PeripheralManager`` (CoreBluetooth's `CBPeripheralManagerDelegate` calls).
public enum PeripheralManagerEvent: Sendable {
  /// The first central subscribed to a characteristic (`didSubscribeTo`). BlueZ reports only
  /// the first subscriber of each characteristic; `central` is nil when bluetoothd does not
  /// say who (the `StartNotify` path).
  case subscribed(Central?, MutableCharacteristic)
  /// The last central unsubscribed or disconnected (`didUnsubscribeFrom`).
  case unsubscribed(Central?, MutableCharacteristic)
  /// A central wrote a value (`didReceiveWrite`), already accepted.
  case write(ATTWriteRequest)
  /// There is room again after ``PeripheralManager/updateValue(_:for:)`` returned false
  /// (`peripheralManagerIsReady(toUpdateSubscribers:)`).
  case readyToUpdate
  /// bluetoothd dropped the advertisement by itself (its `Release`), e.g. the adapter powered
  /// off.
  case advertisingStopped
  /// A central connected, which stopped the controller's connectable advertising, and it
  /// could not be started again beside the link (`reason`: the adapter has only legacy
  /// advertising, or bluetoothd's refusal): other centrals cannot connect until the adapter
  /// advertises again, which Linux does when that central leaves.
  case advertisingPaused(reason: String)
}
