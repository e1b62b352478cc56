// Who is subscribed to a published characteristic, as far as bluetoothd says, and sending a
// value to chosen centrals only where bluetoothd hands out one socket per central.
import BlueZ
import Bluetooth

/// What is known of a characteristic's subscribers.
///
/// bluetoothd names a central when it hands out a notify socket (`AcquireNotify`'s `device`
/// option). Up to BlueZ 5.68 it asks once, when the first central subscribes, and reports
/// nothing more until the last one leaves; from 5.69 it asks once per central, so the list
/// is exact. A subscription through `StartNotify` (characteristics without
/// ``MutableCharacteristic/usesNotifySocket``, or indications before 5.80) names nobody.
public struct CharacteristicSubscribers: Sendable, Hashable {
  /// True while at least one central is subscribed.
  public let isSubscribed: Bool
  /// The centrals bluetoothd named: every subscriber with per-device sockets (BlueZ 5.69 and
  /// later), at most the first one before.
  public let known: [Central]
  /// Whether ``known`` is every subscriber: true with per-device sockets, or when nobody is
  /// subscribed.
  public let isComplete: Bool
}

extension PeripheralManager {
  /// What bluetoothd said about who is subscribed to `characteristic` (see
  /// ``CharacteristicSubscribers`` for what each BlueZ release reports).
  public func subscribers(of characteristic: MutableCharacteristic) -> CharacteristicSubscribers {
    guard let channel = try? channel(for: characteristic) else {
      return CharacteristicSubscribers(isSubscribed: false, known: [], isComplete: true)
    }
    let subscribed = channel.isSubscribed
    let (centrals, complete) = channel.subscriberList
    return CharacteristicSubscribers(
      isSubscribed: subscribed, known: centrals, isComplete: complete || !subscribed)
  }

  /// Whether ``updateValue(_:for:onSubscribedCentrals:)`` can reach chosen centrals of
  /// `characteristic` only: bluetoothd hands out one notify socket per central, and a value
  /// written to it reaches that central only (BlueZ 5.76 and later, told by its release),
  /// and the characteristic uses sockets.
  public func notifiesCentralsIndividually(_ characteristic: MutableCharacteristic) -> Bool {
    (try? channel(for: characteristic))?.perCentralRefusal == nil
  }

  /// Sends `value` only to `centrals` (CoreBluetooth's
  /// `updateValue(_:for:onSubscribedCentrals:)` with a list): each chosen central that is
  /// subscribed gets it through its own notify socket; the others get nothing.
  ///
  /// Returns false when a chosen central's transmit queue is full (nothing was sent;
  /// ``PeripheralManagerEvent/readyToUpdate`` follows), true when the value was handed to
  /// bluetoothd or when none of `centrals` is subscribed.
  ///
  /// Needs bluetoothd 5.76 or later (``notifiesCentralsIndividually(_:)``): up to 5.68 it
  /// hands a server one socket whose values go to every subscribed central, and from 5.69 to
  /// 5.75 a value written to any central's socket still goes to all. There, rather than
  /// broadcast silently, this throws; pass no list (``updateValue(_:for:)``) to send to all.
  /// - Throws: ``BluetoothError/Code/notSupported``, naming the BlueZ release needed;
  ///   ``BluetoothError/Code/valueTooLong``; ``BluetoothError/Code/attributeNotFound`` for a
  ///   characteristic not published here.
  public func updateValue(
    _ value: [UInt8], for characteristic: MutableCharacteristic,
    onSubscribedCentrals centrals: [Central]
  ) throws(BluetoothError) -> Bool {
    let channel = try channel(for: characteristic)
    if let refusal = channel.perCentralRefusal {
      throw BluetoothError(
        .notSupported,
        "notifying only \(centrals.count == 1 ? "one chosen central" : "chosen centrals") is "
          + "not possible here: \(refusal); send without a list to notify all")
    }
    try Self.refuseEmptyTargetedValue(value, characteristic)
    switch try channel.attempt(value, signalReady: true, to: Set(centrals)) {
    case .sent, .notSubscribed: return true
    case .full: return false
    }
  }

  /// Sends `value` to `central` only, waiting while its queue is full (see
  /// ``updateValue(_:for:onSubscribedCentrals:)`` for the BlueZ releases that allow it).
  ///
  /// - Throws: ``BluetoothError/Code/notSubscribed`` when `central` is not (or no longer)
  ///   subscribed; ``BluetoothError/Code/notSupported``; ``BluetoothError/Code/valueTooLong``;
  ///   ``BluetoothError/Code/closed`` when the task is cancelled or the manager closes.
  public func send(
    _ value: [UInt8], for characteristic: MutableCharacteristic, to central: Central
  ) async throws(BluetoothError) {
    let channel = try channel(for: characteristic)
    if let refusal = channel.perCentralRefusal {
      throw BluetoothError(
        .notSupported, "notifying only \(central) is not possible here: \(refusal)")
    }
    try Self.refuseEmptyTargetedValue(value, characteristic)
    while true {
      if Task.isCancelled || isClosed { throw .closed }
      switch try channel.attempt(value, signalReady: false, to: [central]) {
      case .sent: return
      case .notSubscribed: throw .notSubscribed(characteristic.uuid)
      case .full(let generation): await channel.waitForRoom(after: generation)
      }
    }
  }

  /// bluetoothd reads a zero-length datagram on a notify socket as its end, so an empty value
  /// only goes as a signal, to every subscriber.
  private static func refuseEmptyTargetedValue(
    _ value: [UInt8], _ characteristic: MutableCharacteristic
  ) throws(BluetoothError) {
    guard value.isEmpty else { return }
    throw BluetoothError(
      .notSupported,
      "an empty value cannot go to chosen centrals of \(characteristic.uuid): bluetoothd reads "
        + "an empty datagram on a notify socket as its end; send it without a list")
  }
}
