// RemoteService, RemoteCharacteristic, RemoteDescriptor: a peripheral's GATT attributes.
import BlueZ
import Bluetooth
import DBus

/// A service of a connected peripheral (CoreBluetooth's `CBService`).
public struct RemoteService: Sendable, Hashable {
  /// The service UUID.
  public var uuid: BluetoothUUID
  /// Whether it is a primary service.
  public var isPrimary: Bool
  /// bluetoothd's object for it.
  package var path: ObjectPath
}

extension CharacteristicProperties {
  /// Reads the `Flags` bluetoothd reports for a remote characteristic (`read`,
  /// `write-without-response`, `notify`, ...). Security flags such as `encrypt-read` imply the
  /// plain one.
  init(remoteFlags flags: [String]) {
    var result: Self = []
    for flag in flags {
      switch flag {
      case "broadcast": result.insert(.broadcast)
      case "read", "encrypt-read", "encrypt-authenticated-read", "secure-read":
        result.insert(.read)
      case "write-without-response": result.insert(.writeWithoutResponse)
      case "write", "encrypt-write", "encrypt-authenticated-write", "secure-write":
        result.insert(.write)
      case "notify": result.insert(.notify)
      case "indicate": result.insert(.indicate)
      case "authenticated-signed-writes": result.insert(.authenticatedSignedWrites)
      default: break
      }
    }
    self = result
  }
}

/// A characteristic of a connected peripheral (CoreBluetooth's `CBCharacteristic`).
public struct RemoteCharacteristic: Sendable, Hashable {
  /// The characteristic UUID.
  public var uuid: BluetoothUUID
  /// What it supports.
  public var properties: CharacteristicProperties
  /// BlueZ's raw flags, security flags included.
  public var flags: [String]
  /// The service it belongs to.
  package var service: ObjectPath
  /// bluetoothd's object for it.
  package var path: ObjectPath
}

/// A descriptor of a characteristic (CoreBluetooth's `CBDescriptor`).
public struct RemoteDescriptor: Sendable, Hashable {
  /// The descriptor UUID.
  public var uuid: BluetoothUUID
  /// The characteristic it belongs to.
  package var characteristic: ObjectPath
  /// bluetoothd's object for it.
  package var path: ObjectPath
}

/// How to write a characteristic value (CoreBluetooth's `CBCharacteristicWriteType`).
public enum CharacteristicWriteType: Sendable, Hashable {
  /// A write request: the peer acknowledges it.
  case withResponse
  /// A write command: no acknowledgement.
  case withoutResponse
}
