// AdvertisementReport: the fields of one advertising report a gateway publishes, taken from a
// BLEKit Discovery (or made directly, e.g. by tests and benchmarks).

import BLEKit
import Bluetooth
import Sightings

/// What a gateway publishes about one report: a value copy of a ``BLEKit/Discovery``'s
/// advertised fields.
public struct AdvertisementReport: Sendable, Hashable {
  /// The advertiser's address, e.g. `00:AA:01:01:00:01`.
  public var address: String
  /// `public` or `random`, when bluetoothd reported it.
  public var addressType: AddressType?
  /// The RSSI in dBm, `nil` when unknown (HCI's 127).
  public var rssi: Int?
  /// The advertised TX power in dBm.
  public var txPower: Int?
  /// The advertised or cached name.
  public var name: String?
  /// Advertised service UUIDs.
  public var serviceUUIDs: [BluetoothUUID]
  /// Manufacturer data: company ID to the bytes after it.
  public var manufacturerData: [UInt16: [UInt8]]
  /// Service data by UUID.
  public var serviceData: [BluetoothUUID: [UInt8]]

  /// Creates a report.
  public init(
    address: String, addressType: AddressType? = nil, rssi: Int? = nil, txPower: Int? = nil,
    name: String? = nil, serviceUUIDs: [BluetoothUUID] = [],
    manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [BluetoothUUID: [UInt8]] = [:]
  ) {
    self.address = address
    self.addressType = addressType
    self.rssi = rssi
    self.txPower = txPower
    self.name = name
    self.serviceUUIDs = serviceUUIDs
    self.manufacturerData = manufacturerData
    self.serviceData = serviceData
  }

  /// The report a discovery carries.
  public init(_ discovery: Discovery) {
    self.init(
      address: discovery.address.rawValue, addressType: discovery.addressType,
      rssi: discovery.rssi, txPower: discovery.txPower, name: discovery.name,
      serviceUUIDs: discovery.serviceUUIDs, manufacturerData: discovery.manufacturerData,
      serviceData: discovery.serviceData)
  }

  /// The FolkBears temporary ID in hex when the report carries one (company 0xFFFF, the
  /// FolkBears layout), else `nil`.
  public var folkBearsID: String? {
    guard let bytes = manufacturerData[FolkBearsTempUserID.companyID] else { return nil }
    return try? FolkBearsTempUserID(data: bytes).hex
  }
}
