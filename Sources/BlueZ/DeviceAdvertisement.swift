// DeviceAdvertisement: what a scan reads of an org.bluez.Device1 object, decoded in one pass.
import DBus

/// The properties of a `Device1` object that describe what it advertised (address, adapter,
/// name, RSSI, TX power, service UUIDs, manufacturer and service data, connection state).
///
/// Each is read through ``Device1``'s property table, so with the same names, types and
/// rules as the proxy: `nil` when a required property (`Address`, `Adapter`, `Connected`) is
/// absent or ill-typed, as ``BlueZProxy/make(path:properties:connection:)`` would refuse it; an
/// optional property of the wrong type reads as absent.
public struct DeviceAdvertisement: Sendable, Equatable {
  /// `Address`, e.g. `00:AA:01:01:00:01`.
  public var address: String
  /// `AddressType`: `public` or `random`.
  public var addressType: String?
  /// `Name`, when the device sent one.
  public var name: String?
  /// `Adapter`: the adapter the device was seen on.
  public var adapter: ObjectPath
  /// `RSSI` in dBm, as bluetoothd reported it (127 included).
  public var rssi: Int16?
  /// `TxPower` in dBm.
  public var txPower: Int16?
  /// `UUIDs`: advertised (or resolved) service UUIDs, as bluetoothd spells them.
  public var uuids: [String]?
  /// `ManufacturerData` by company identifier.
  public var manufacturerData: [UInt16: [UInt8]]?
  /// `ServiceData` by service UUID string.
  public var serviceData: [String: [UInt8]]?
  /// `Connected`.
  public var connected: Bool

  /// Decodes `properties` (a `Device1` property dictionary, variants unwrapped); `nil` when a
  /// required property is missing or ill-typed.
  public init?(_ properties: [String: DBusValue]) {
    func read<Value>(_ property: ProxyProperty<Device1, Value>) -> Value? {
      properties[property.name].flatMap(property.decode)
    }
    guard let address = read(Device1.address), let adapter = read(Device1.adapter),
      let connected = read(Device1.connected)
    else { return nil }
    self.address = address
    self.adapter = adapter
    self.connected = connected
    addressType = read(Device1.addressType)
    name = read(Device1.name)
    rssi = read(Device1.rssi)
    txPower = read(Device1.txPower)
    uuids = read(Device1.uuids)
    manufacturerData = read(Device1.manufacturerData)
    serviceData = read(Device1.serviceData)
  }
}
