// ManufacturerData: one manufacturer-specific data field of an advertisement (AD type 0xFF):
// a company ID and its bytes.

import Bluetooth

/// Manufacturer-specific data: a company identifier and the bytes that follow it.
///
/// BlueZ reports it in `org.bluez.Device1.ManufacturerData` as `a{qv}`: the company ID as the
/// key and the bytes *after* it as the value (`65535 -> 02 10 01 02 ...` for company 0xFFFF). In raw
/// advertising data, and in CoreBluetooth's `kCBAdvDataManufacturerData`, the company ID comes
/// first, little-endian; `init(adPayload:)` reads that form.
public struct ManufacturerData: Hashable, Sendable, CustomStringConvertible {
  /// The company identifier (Bluetooth SIG Assigned Numbers 7.1).
  public let companyID: UInt16
  /// The bytes after the company ID.
  public let data: [UInt8]

  /// Creates manufacturer data from BlueZ's form: the key and the value.
  public init(companyID: UInt16, data: [UInt8]) {
    self.companyID = companyID
    self.data = data
  }

  /// Reads the AD payload form: company ID little-endian, then the data.
  ///
  /// - Throws: ``BluetoothError/Code/advertisingFieldTooShort`` with fewer than 2 bytes.
  public init(adPayload payload: some Collection<UInt8>) throws(BluetoothError) {
    let bytes = Array(payload)
    guard bytes.count >= 2 else {
      throw .tooShort(field: "manufacturer data", count: bytes.count, needed: 2)
    }
    self.init(companyID: UInt16(bytes[0]) | UInt16(bytes[1]) << 8, data: Array(bytes[2...]))
  }

  /// The AD payload form: company ID little-endian, then the data.
  public var adPayload: [UInt8] {
    [UInt8(truncatingIfNeeded: companyID), UInt8(truncatingIfNeeded: companyID >> 8)] + data
  }

  /// The company's name, when it is in blekit's table.
  public var companyName: String? { AssignedNumbers.companyName(companyID) }

  /// E.g. `0xFFFF (Reserved for testing (no company assigned)): 02 10 ...`.
  public var description: String {
    let name = companyName.map { " (\($0))" } ?? ""
    return "\(HexBytes.companyID(companyID))\(name): \(HexBytes.format(data, separator: " "))"
  }
}
