// org.bluez.GattService1: a remote GATT service, as resolved by bluetoothd.
import DBus

/// A typed proxy for a remote `org.bluez.GattService1` (BlueZ's `doc/org.bluez.GattService.rst`).
public struct GattService1: BlueZProxy {
  public static let interface = BlueZ.Interface.gattService

  public let snapshot: ProxySnapshot
  public init(snapshot: ProxySnapshot) { self.snapshot = snapshot }

  /// The service UUID, a lowercase 128-bit string.
  public static let uuid = ProxyProperty<Self, String>(
    "UUID", "s", required: true, decode: Decode.string)
  public static let primary = ProxyProperty<Self, Bool>("Primary", "b", decode: Decode.bool)
  /// The device the service belongs to.
  public static let device = ProxyProperty<Self, ObjectPath>(
    "Device", "o", required: true, decode: Decode.path)
  public static let includes = ProxyProperty<Self, [ObjectPath]>(
    "Includes", "ao", decode: Decode.paths)
  public static let handle = ProxyProperty<Self, UInt16>("Handle", "q", decode: Decode.uint16)

  public static let propertyTable: [PropertyRow] = [
    uuid.row, primary.row, device.row, includes.row, handle.row,
  ]
}
