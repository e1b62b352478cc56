// The peripheral side's errors, as BluetoothError values with their one-line messages.
import BlueZ
import Bluetooth

extension BluetoothError.Code {
  /// The advertisement does not fit; the message says which fields take how many bytes, and
  /// ``BluetoothError/advertisingPayloadSize`` has the sizes (``BluetoothError/size`` the
  /// advertising data's length, ``BluetoothError/limit`` the limit).
  public static let advertisementTooLarge = Self(rawValue: "advertisementTooLarge")
  /// Nobody is subscribed to the characteristic (any more).
  public static let notSubscribed = Self(rawValue: "notSubscribed")
  /// The value is longer than one notification can carry for the current subscribers.
  public static let valueTooLong = Self(rawValue: "valueTooLong")
  /// The manager was closed.
  public static let closed = Self(rawValue: "closed")
}

extension BluetoothError {
  /// bluetoothd's or the bus's error, as BLEKit reports it.
  package static func bluez(_ error: BlueZError) -> BluetoothError {
    BluetoothError(error)
  }

  /// An advertisement whose sizes do not fit; the message says which fields take how many
  /// bytes, e.g. "advertisement is 43 bytes, legacy limit is 31: flags 3, 128-bit service
  /// UUID 18, manufacturer data 0xFFFF 22".
  package static func advertisementTooLarge(_ sizes: AdvertisingPayloadSize) -> BluetoothError {
    var error = BluetoothError(.advertisementTooLarge, sizes.description)
    error.advertisingPayloadSize = sizes
    error.size = sizes.advertisingDataLength
    error.limit = sizes.limit
    return error
  }

  /// A characteristic never added to this manager (or whose service was removed).
  package static func unknownCharacteristic(_ uuid: BluetoothUUID) -> BluetoothError {
    BluetoothError(.attributeNotFound, "characteristic \(uuid) is not published by this manager")
  }

  /// Nobody is subscribed to the characteristic.
  package static func notSubscribed(_ uuid: BluetoothUUID) -> BluetoothError {
    BluetoothError(.notSubscribed, "no central is subscribed to characteristic \(uuid)")
  }

  /// A value longer than one notification can carry.
  package static func valueTooLong(length: Int, maximum: Int) -> BluetoothError {
    BluetoothError(
      .valueTooLong,
      "a \(length)-byte value does not fit in one notification (at most \(maximum) bytes)")
  }

  /// The peripheral manager was closed.
  package static var closed: BluetoothError {
    BluetoothError(.closed, "the peripheral manager is closed")
  }
}
