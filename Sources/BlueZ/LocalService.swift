// A local GATT service, exported as org.bluez.GattService1.
import DBus

/// A service in a ``GattApplication``: a UUID, primary or secondary, and its characteristics.
public struct LocalService: Sendable {
  /// The D-Bus interface this value is exported as.
  public static let interface = BlueZ.Interface.gattService

  /// The service's UUID as BlueZ spells it (16-bit short form or 128-bit string).
  public var uuid: String
  public var isPrimary: Bool
  public var characteristics: [LocalCharacteristic]

  public init(uuid: String, isPrimary: Bool = true, characteristics: [LocalCharacteristic]) {
    self.uuid = uuid
    self.isPrimary = isPrimary
    self.characteristics = characteristics
  }
}
