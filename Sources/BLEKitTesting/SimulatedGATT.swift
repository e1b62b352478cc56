// What a simulated peripheral is made of: its advertisement and its GATT database, as plain
// values, and what it records and can be told to answer.
import BLEKit
import Bluetooth

/// A descriptor of a simulated characteristic.
public struct SimulatedDescriptor: Sendable, Hashable {
  public var uuid: BluetoothUUID
  /// The value reads return; writes replace it.
  public var value: [UInt8]

  public init(uuid: BluetoothUUID, value: [UInt8] = []) {
    self.uuid = uuid
    self.value = value
  }
}

/// A characteristic of a simulated peripheral.
public struct SimulatedCharacteristic: Sendable, Hashable {
  public var uuid: BluetoothUUID
  /// What a central may do: read, write, write without response, notify, indicate.
  public var properties: CharacteristicProperties
  /// The value reads return; writes replace it.
  public var value: [UInt8]
  public var descriptors: [SimulatedDescriptor]

  public init(
    uuid: BluetoothUUID, properties: CharacteristicProperties, value: [UInt8] = [],
    descriptors: [SimulatedDescriptor] = []
  ) {
    self.uuid = uuid
    self.properties = properties
    self.value = value
    self.descriptors = descriptors
  }
}

/// A service of a simulated peripheral.
public struct SimulatedService: Sendable, Hashable {
  public var uuid: BluetoothUUID
  public var isPrimary: Bool
  public var characteristics: [SimulatedCharacteristic]

  public init(
    uuid: BluetoothUUID, isPrimary: Bool = true, characteristics: [SimulatedCharacteristic]
  ) {
    self.uuid = uuid
    self.isPrimary = isPrimary
    self.characteristics = characteristics
  }
}

/// What a simulated peripheral advertises, as bluetoothd exports it on its device object.
public struct SimulatedAdvertisement: Sendable, Hashable {
  /// The local name (`Device1.Name`); `nil` advertises none.
  public var name: String?
  /// The service UUIDs advertised (`Device1.UUIDs`); a discovery filter on services matches
  /// these.
  public var serviceUUIDs: [BluetoothUUID]
  /// Manufacturer-specific data by company identifier.
  public var manufacturerData: [UInt16: [UInt8]]
  /// Service data by service UUID.
  public var serviceData: [BluetoothUUID: [UInt8]]
  /// The signal strength the central hears, in dBm; change it with
  /// ``SimulatedPeripheral/setRSSI(_:)``.
  public var rssi: Int
  /// The advertised transmit power, in dBm.
  public var txPower: Int?

  public init(
    name: String? = nil, serviceUUIDs: [BluetoothUUID] = [],
    manufacturerData: [UInt16: [UInt8]] = [:], serviceData: [BluetoothUUID: [UInt8]] = [:],
    rssi: Int = -60, txPower: Int? = nil
  ) {
    self.name = name
    self.serviceUUIDs = serviceUUIDs
    self.manufacturerData = manufacturerData
    self.serviceData = serviceData
    self.rssi = rssi
    self.txPower = txPower
  }
}

/// A write the app made to a simulated peripheral.
public struct SimulatedWrite: Sendable, Hashable {
  /// The characteristic's (or descriptor's) UUID.
  public var uuid: BluetoothUUID
  public var value: [UInt8]
  /// `true` for a Write Request, `false` for a Write Command (write without response).
  public var withResponse: Bool

  public init(uuid: BluetoothUUID, value: [UInt8], withResponse: Bool) {
    self.uuid = uuid
    self.value = value
    self.withResponse = withResponse
  }
}

/// How a simulated peripheral answers requests to one attribute, instead of serving them.
public enum SimulatedFault: Sendable, Hashable {
  /// Reads, writes and subscriptions are answered with this ATT error code, turned into the
  /// D-Bus error bluetoothd sends for it (BlueZ's `src/gatt-client.c`,
  /// `create_gatt_dbus_error`): 0x02 and 0x03 `org.bluez.Error.NotPermitted` ("Read not
  /// permitted", "Write not permitted"); 0x05, 0x0C and 0x0F `NotPermitted` ("Not paired");
  /// 0x07 and 0x0D `InvalidArguments`; 0x08 `NotAuthorized`; 0x06 `NotSupported`; any other
  /// code `org.bluez.Error.Failed` "Operation failed with ATT error: 0xNN".
  case attError(UInt8)
  /// Requests get no answer: each is held until the test calls
  /// ``SimulatedPeripheral/releaseHeldRequests()`` (then it is served late, as a slow
  /// peripheral would) or the link drops (then it fails as bluetoothd fails a request whose
  /// link went: `org.bluez.Error.Failed` "Operation failed"). The simulation has no ATT timeout of its own:
  /// bluetoothd's is 30 s and ends the link, which a test models with
  /// ``SimulatedPeripheral/disconnect()``.
  case noAnswer
}

/// The ATT errors apps meet most, as faults.
extension SimulatedFault {
  public static let readNotPermitted = SimulatedFault.attError(0x02)
  public static let writeNotPermitted = SimulatedFault.attError(0x03)
  public static let insufficientAuthentication = SimulatedFault.attError(0x05)
  public static let requestNotSupported = SimulatedFault.attError(0x06)
  public static let insufficientAuthorization = SimulatedFault.attError(0x08)
  public static let invalidAttributeValueLength = SimulatedFault.attError(0x0D)
  public static let unlikelyError = SimulatedFault.attError(0x0E)
  public static let insufficientEncryption = SimulatedFault.attError(0x0F)
}

extension SimulatedFault {
  /// The D-Bus error name and text bluetoothd answers for an ATT error code.
  static func bluezError(forATT code: UInt8) -> (name: String, message: String) {
    switch code {
    case 0x02: ("org.bluez.Error.NotPermitted", "Read not permitted")
    case 0x03: ("org.bluez.Error.NotPermitted", "Write not permitted")
    case 0x05, 0x0C, 0x0F: ("org.bluez.Error.NotPermitted", "Not paired")
    case 0x07: ("org.bluez.Error.InvalidArguments", "Invalid offset")
    case 0x0D: ("org.bluez.Error.InvalidArguments", "Invalid Length")
    case 0x08: ("org.bluez.Error.NotAuthorized", "Operation Not Authorized")
    case 0x06: ("org.bluez.Error.NotSupported", "Operation is not supported")
    default:
      (
        "org.bluez.Error.Failed",
        "Operation failed with ATT error: 0x" + (code < 0x10 ? "0" : "")
          + String(code, radix: 16)
      )
    }
  }
}
