// The requests a peripheral receives from a central (CoreBluetooth's CBATTRequest, CBCentral).
import BlueZ
import Bluetooth
import DBus

/// A remote central, as bluetoothd names it.
public struct Central: Sendable, Hashable, CustomStringConvertible {
  /// The central's `org.bluez.Device1` object path, e.g. `/org/bluez/hci1/dev_00_AA_01_00_00_00`.
  public let identifier: String

  public init(identifier: String) { self.identifier = identifier }

  /// The Bluetooth address encoded in the object path, when it has the `dev_XX_..` form.
  public var address: String? {
    guard let last = identifier.split(separator: "/").last, last.hasPrefix("dev_") else {
      return nil
    }
    return String(last.dropFirst(4).map { $0 == "_" ? ":" : $0 })
  }

  public var description: String { address ?? identifier }
}

/// A read of a characteristic's value (`peripheralManager(_:didReceiveRead:)`).
public struct ATTReadRequest: Sendable, Hashable {
  public let characteristic: BluetoothUUID
  public let central: Central?
  /// Where the read starts; long values are read in pieces with growing offsets.
  public let offset: Int
  /// The central's ATT MTU, when bluetoothd says.
  public let mtu: Int?
}

/// A write to a characteristic's value (`peripheralManager(_:didReceiveWrite:)`).
public struct ATTWriteRequest: Sendable, Hashable {
  public let characteristic: BluetoothUUID
  public let central: Central?
  public let value: [UInt8]
  public let offset: Int
  /// True for a write without response (ATT Write Command).
  public let withoutResponse: Bool
  public let mtu: Int?
}

extension Central {
  init?(_ path: ObjectPath?) {
    guard let path else { return nil }
    self.init(identifier: path.rawValue)
  }
}
