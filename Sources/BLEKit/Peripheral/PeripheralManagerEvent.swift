// What a PeripheralManager reports: subscriptions, writes, readiness, advertising ending.
import Bluetooth

/// An event of a ``PeripheralManager`` (CoreBluetooth's `CBPeripheralManagerDelegate` calls).
public enum PeripheralManagerEvent: Sendable {
  /// A central subscribed to a characteristic (`didSubscribeTo`). With one notify socket per
  /// central (BlueZ 5.69 and later) this comes for each central; before, only for the first
  /// subscriber of each characteristic. `central` is nil when bluetoothd does not say who
  /// (the `StartNotify` path).
  case subscribed(Central?, MutableCharacteristic)
  /// A central unsubscribed or disconnected (`didUnsubscribeFrom`): with one socket per
  /// central, each one as it leaves, so others may still be subscribed
  /// (``PeripheralManager/subscribers(of:)`` says); before BlueZ 5.69, the last one.
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
