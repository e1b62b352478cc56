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
    var collector = Collector()
    for (key, value) in properties { collector.take(key, value) }
    guard let advertisement = collector.advertisement else { return nil }
    self = advertisement
  }

  /// Gathers a `Device1`'s properties one at a time, from a dictionary or straight from a
  /// message (``BlueZObjectTree`` reads a new device's this way, before anything else).
  struct Collector {
    // The required properties until they are known; the optional ones go straight into
    // `gathered`, whose required fields are placeholders until `advertisement` fills them in.
    private var address: String?
    private var adapter: ObjectPath?
    private var connected: Bool?
    private var gathered = DeviceAdvertisement(address: "", adapter: .root, connected: false)

    /// Notes one property; names that are not read here are ignored.
    mutating func take(_ key: String, _ value: DBusValue) {
      // The names are Device1's table's (Device1.swift); a test checks that both agree. The
      // key's length picks the candidates first: a scan decodes every report, and comparing
      // each key with every name in turn cost more than the decoding itself.
      switch key.utf8.count {
      case 4:
        if key == "Name" {
          gathered.name = value.stringValue
        } else if key == "RSSI" {
          gathered.rssi = value.int16Value
        }
      case 5:
        if key == "UUIDs" { gathered.uuids = value.stringArrayValue }
      case 7:
        if key == "Address" {
          address = value.stringValue
        } else if key == "Adapter" {
          adapter = value.objectPathValue
        } else if key == "TxPower" {
          gathered.txPower = value.int16Value
        }
      case 9:
        if key == "Connected" { connected = value.boolValue }
      case 11:
        if key == "AddressType" {
          gathered.addressType = value.stringValue
        } else if key == "ServiceData" {
          gathered.serviceData = Decode.bytesByString(value)
        }
      case 16:
        if key == "ManufacturerData" {
          gathered.manufacturerData = Decode.bytesByUInt16(value)
        }
      default:
        break
      }
    }

    /// What was gathered; `nil` without `Address`, `Adapter` and `Connected`.
    var advertisement: DeviceAdvertisement? {
      guard let address, let adapter, let connected else { return nil }
      var advertisement = gathered
      advertisement.address = address
      advertisement.adapter = adapter
      advertisement.connected = connected
      return advertisement
    }
  }

  private init(address: String, adapter: ObjectPath, connected: Bool) {
    self.address = address
    self.adapter = adapter
    self.connected = connected
  }
}
