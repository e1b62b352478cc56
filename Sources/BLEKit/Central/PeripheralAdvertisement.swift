// What bluetoothd knows of a peripheral's advertisement: Device1's Name, Alias, Appearance,
// UUIDs, ManufacturerData and ServiceData, read in one go (for `blekit clone`).
import BlueZ
import Bluetooth

/// The advertisement data bluetoothd merged for a peripheral, as its `org.bluez.Device1`
/// object holds it now (CoreBluetooth's `advertisementData`, without a scan).
public struct PeripheralAdvertisement: Sendable, Hashable {
  /// `Name`: the advertised name, or (once connected) the GAP Device Name the peripheral serves.
  public var name: String?
  /// `Alias`: the name bluetoothd shows (the address in dashes when it knows no name).
  public var alias: String?
  /// `Appearance`: the GAP appearance, when advertised or read.
  public var appearance: UInt16?
  /// `UUIDs`: advertised service UUIDs; once the services are resolved bluetoothd adds every
  /// GATT service's UUID to them.
  public var serviceUUIDs: [BluetoothUUID]
  /// `ManufacturerData` by company identifier.
  public var manufacturerData: [UInt16: [UInt8]]
  /// `ServiceData` by service UUID.
  public var serviceData: [BluetoothUUID: [UInt8]]

  public init(
    name: String? = nil, alias: String? = nil, appearance: UInt16? = nil,
    serviceUUIDs: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
    serviceData: [BluetoothUUID: [UInt8]] = [:]
  ) {
    self.name = name
    self.alias = alias
    self.appearance = appearance
    self.serviceUUIDs = serviceUUIDs
    self.manufacturerData = manufacturerData
    self.serviceData = serviceData
  }
}

extension Peripheral {
  /// The advertisement data bluetoothd holds for the peripheral (its `Device1` properties);
  /// an absent property is `nil` or empty, and a UUID bluetoothd spells oddly is left out.
  ///
  /// - Throws: ``BluetoothError/Code/peripheralNotFound`` when bluetoothd no longer knows it.
  public func advertisement() async throws(BluetoothError) -> PeripheralAdvertisement {
    let device = try await device()
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
    for (key, value) in device[Device1.serviceData] ?? [:] {
      if let uuid = try? BluetoothUUID(key) { serviceData[uuid] = value }
    }
    return PeripheralAdvertisement(
      name: device[Device1.name], alias: device[Device1.alias],
      appearance: device[Device1.appearance],
      serviceUUIDs: (device[Device1.uuids] ?? []).compactMap { try? BluetoothUUID($0) },
      manufacturerData: device[Device1.manufacturerData] ?? [:], serviceData: serviceData)
  }
}
