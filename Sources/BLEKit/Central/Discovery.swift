// Discovery: one sighting of an advertising peripheral and the data it advertised.
import BlueZ
import Bluetooth
import DBus

/// A peripheral seen while scanning, with the advertisement data bluetoothd merged for it
/// (CoreBluetooth's `didDiscover` with its `advertisementData` and `RSSI`).
public struct Discovery: Sendable, Hashable {
  /// The peripheral, usable with ``CentralManager/connect(to:timeout:retry:)``.
  public var peripheral: PeripheralIdentifier
  /// The peripheral's address.
  public var address: BluetoothAddress { peripheral.address }
  /// `public` or `random`, when bluetoothd reported it.
  public var addressType: AddressType?
  /// The advertised (or cached) name.
  public var name: String?
  /// The RSSI in dBm; `nil` when unknown (absent, or HCI's 127 "not available").
  public var rssi: Int?
  /// The RSSI as bluetoothd reported it, 127 included.
  public var reportedRSSI: Int?
  /// The advertised transmit power in dBm.
  public var txPower: Int?
  /// Service UUIDs advertised (or, for a device already resolved, its GATT services).
  public var serviceUUIDs: [BluetoothUUID]
  /// Manufacturer data by company identifier.
  public var manufacturerData: [UInt16: [UInt8]]
  /// Service data by service UUID.
  public var serviceData: [BluetoothUUID: [UInt8]]
  /// Whether the peripheral is connected (to this host) right now.
  public var isConnected: Bool
  /// When blekit saw this report.
  public var timestamp: ContinuousClock.Instant

  /// Reads a discovery from what bluetoothd holds for the device object at `path`; `nil` when
  /// the address is unusable.
  init?(
    _ advertised: DeviceAdvertisement, path: ObjectPath, at timestamp: ContinuousClock.Instant
  ) {
    guard let address = BluetoothAddress(rawValue: advertised.address) else { return nil }
    self.peripheral = PeripheralIdentifier(
      address: address, adapter: advertised.adapter, path: path)
    self.addressType = advertised.addressType.flatMap(AddressType.init(rawValue:))
    self.name = advertised.name
    let reported = advertised.rssi.map(Int.init)
    self.reportedRSSI = reported
    self.rssi = RSSIFilter.isKnown(reported) ? reported : nil
    self.txPower = advertised.txPower.map(Int.init)
    self.serviceUUIDs = (advertised.uuids ?? []).compactMap { try? BluetoothUUID($0) }
    self.manufacturerData = advertised.manufacturerData ?? [:]
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
    for (key, value) in advertised.serviceData ?? [:] {
      if let uuid = try? BluetoothUUID(key) { serviceData[uuid] = value }
    }
    self.serviceData = serviceData
    self.isConnected = advertised.connected
    self.timestamp = timestamp
  }
}

/// Names a remote peripheral: its address on one adapter (bluetoothd's Device1 object).
public struct PeripheralIdentifier: Sendable, Hashable, CustomStringConvertible {
  /// The peripheral's address.
  public var address: BluetoothAddress
  /// The adapter it was seen on.
  package var adapter: ObjectPath
  /// The Device1 object path, e.g. `/org/bluez/hci0/dev_00_AA_01_01_00_01`.
  package var path: ObjectPath

  public var description: String { address.rawValue }
}
