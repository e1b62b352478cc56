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
  /// - Throws: `AdvertisingDecodingError.tooShort` with fewer than 2 bytes.
  public init(adPayload payload: some Collection<UInt8>) throws(AdvertisingDecodingError) {
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

/// Why advertising bytes could not be decoded. Every case describes itself in one line.
public enum AdvertisingDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A field has fewer bytes than its layout needs.
  case tooShort(field: String, count: Int, needed: Int)
  /// An AD structure's length byte runs past the end of the data.
  case truncatedStructure(offset: Int, declaredLength: Int, available: Int)
  /// An AD type that does not carry what was asked for.
  case unexpectedType(UInt8)
  /// A service data UUID of a size other than 2, 4 or 16 bytes.
  case invalidUUIDLength(Int)

  public var description: String {
    switch self {
    case .tooShort(let field, let count, let needed):
      "\(field) is \(count) bytes, needs at least \(needed)"
    case .truncatedStructure(let offset, let declared, let available):
      "AD structure at offset \(offset) declares \(declared) bytes, only \(available) remain"
    case .unexpectedType(let type):
      "unexpected AD type 0x\(HexBytes.format([type]))"
    case .invalidUUIDLength(let length):
      "a UUID of \(length) bytes (expected 2, 4 or 16)"
    }
  }
}
