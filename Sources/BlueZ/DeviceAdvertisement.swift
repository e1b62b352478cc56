// DeviceAdvertisement: what a scan reads of an org.bluez.Device1 object, decoded in one pass.
import DBus

/// The properties of a `Device1` object that describe what it advertised (address, adapter,
/// name, RSSI, TX power, service UUIDs, manufacturer and service data, connection state),
/// decoded in one pass over its property dictionary.
///
/// It reads the same properties as ``Device1``'s table with the same rules: `nil` when a
/// required property (`Address`, `Adapter`, `Connected`) is absent or ill-typed, as
/// ``BlueZProxy/make(path:properties:connection:)`` would refuse it; an optional property of
/// the wrong type reads as absent. A scan does this for every report bluetoothd sends, so it
/// walks the dictionary once instead of looking each property up and building a proxy.
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
    var address: String?
    var adapter: ObjectPath?
    var connected: Bool?
    for (key, value) in properties {
      // The names are Device1's table's (Device1.swift); a test checks that both agree.
      switch key {
      case "Address": address = value.stringValue
      case "AddressType": addressType = value.stringValue
      case "Name": name = value.stringValue
      case "Adapter": adapter = value.objectPathValue
      case "RSSI": rssi = value.int16Value
      case "TxPower": txPower = value.int16Value
      case "UUIDs": uuids = value.stringArrayValue
      case "ManufacturerData": manufacturerData = Decode.bytesByUInt16(value)
      case "ServiceData": serviceData = Decode.bytesByString(value)
      case "Connected": connected = value.boolValue
      default: continue
      }
    }
    guard let address, let adapter, let connected else { return nil }
    self.address = address
    self.adapter = adapter
    self.connected = connected
  }
}
