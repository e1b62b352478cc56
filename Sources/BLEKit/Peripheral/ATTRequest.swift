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

/// The kind of link a request came over (BlueZ's `link` option).
public enum LinkType: String, Sendable, Hashable, CustomStringConvertible {
  /// Bluetooth Low Energy.
  case le = "LE"
  /// Classic Bluetooth (BR/EDR), for a dual-mode adapter serving GATT over it.
  case bredr = "BR/EDR"

  public var description: String { rawValue }
}

/// A read of a characteristic's or a descriptor's value (`peripheralManager(_:didReceiveRead:)`).
public struct ATTReadRequest: Sendable, Hashable {
  /// The characteristic read, or the one that owns the descriptor read.
  public let characteristic: BluetoothUUID
  /// The descriptor read; nil for a read of the characteristic's value.
  public let descriptor: BluetoothUUID?
  /// The central asking, when bluetoothd says (it does for every request since BlueZ 5.46).
  public let central: Central?
  /// Where the read starts; long values are read in pieces with growing offsets.
  public let offset: Int
  /// The central's ATT MTU, when bluetoothd says.
  public let mtu: Int?
  /// The link the request came over, when bluetoothd says.
  public let link: LinkType?

  package init(
    characteristic: BluetoothUUID, descriptor: BluetoothUUID? = nil, central: Central?,
    offset: Int, mtu: Int?, link: LinkType? = nil
  ) {
    self.characteristic = characteristic
    self.descriptor = descriptor
    self.central = central
    self.offset = offset
    self.mtu = mtu
    self.link = link
  }
}

/// A write to a characteristic's or a descriptor's value (`peripheralManager(_:didReceiveWrite:)`).
public struct ATTWriteRequest: Sendable, Hashable {
  /// The characteristic written, or the one that owns the descriptor written.
  public let characteristic: BluetoothUUID
  /// The descriptor written; nil for a write of the characteristic's value.
  public let descriptor: BluetoothUUID?
  /// The central writing, when bluetoothd says.
  public let central: Central?
  public let value: [UInt8]
  public let offset: Int
  /// True for a write without response (ATT Write Command).
  public let withoutResponse: Bool
  /// The central's ATT MTU, when bluetoothd says.
  public let mtu: Int?
  /// The link the request came over, when bluetoothd says.
  public let link: LinkType?

  package init(
    characteristic: BluetoothUUID, descriptor: BluetoothUUID? = nil, central: Central?,
    value: [UInt8], offset: Int, withoutResponse: Bool, mtu: Int?, link: LinkType? = nil
  ) {
    self.characteristic = characteristic
    self.descriptor = descriptor
    self.central = central
    self.value = value
    self.offset = offset
    self.withoutResponse = withoutResponse
    self.mtu = mtu
    self.link = link
  }
}

extension Central {
  init?(_ path: ObjectPath?) {
    guard let path else { return nil }
    self.init(identifier: path.rawValue)
  }
}

extension LinkType {
  /// BlueZ's `link` option value ("LE", "BR/EDR"); nil when absent or unknown.
  init?(option: String?) {
    guard let option else { return nil }
    self.init(rawValue: option)
  }
}
