// FolkBearsTempUserID: the contact-detection payload of FolkBears, carried in
// manufacturer data: company 0xFFFF, then type 0x02, length 0x10, then a 16-byte temporary ID.

import BLEKit

/// A FolkBears temporary user ID, decoded from manufacturer data.
///
/// Layout, after the company ID `0xFFFF` (which BlueZ gives as the dictionary key):
///
///     offset 0  type    0x02
///     offset 1  length  0x10 (16)
///     offset 2  16 bytes of temporary user ID
///
/// Decoding checks every byte it reads, the type and length bytes included, and rejects
/// trailing bytes: any input gives a value or a typed reason.
public struct FolkBearsTempUserID: Hashable, Sendable, CustomStringConvertible {
  /// The company ID the layout uses (reserved for testing).
  public static let companyID: UInt16 = 0xFFFF
  /// The type byte.
  public static let type: UInt8 = 0x02
  /// The length byte: the ID's length.
  public static let idLength: UInt8 = 0x10
  /// The bytes after the company ID: type, length and ID.
  public static let dataLength = 2 + Int(idLength)

  /// The 16 ID bytes.
  public let id: [UInt8]

  /// Creates an ID from 16 bytes; `nil` for any other count.
  public init?(id: [UInt8]) {
    guard id.count == Int(Self.idLength) else { return nil }
    self.id = id
  }

  /// Decodes the bytes after the company ID (BlueZ's `ManufacturerData` value for `0xFFFF`).
  ///
  /// - Throws: `FolkBearsDecodingError` saying what is wrong.
  public init(data: some Collection<UInt8>) throws(FolkBearsDecodingError) {
    let bytes = Array(data)
    guard let type = bytes.first else { throw .tooShort(count: 0) }
    guard type == Self.type else { throw .wrongType(type) }
    guard bytes.count >= 2 else { throw .tooShort(count: bytes.count) }
    guard bytes[1] == Self.idLength else { throw .wrongLength(bytes[1]) }
    guard bytes.count >= Self.dataLength else { throw .tooShort(count: bytes.count) }
    guard bytes.count == Self.dataLength else {
      throw .trailingBytes(count: bytes.count - Self.dataLength)
    }
    self.id = Array(bytes[2...])
  }

  /// Decodes manufacturer data, checking the company ID first.
  ///
  /// - Throws: `FolkBearsDecodingError` saying what is wrong.
  public init(_ manufacturerData: ManufacturerData) throws(FolkBearsDecodingError) {
    guard manufacturerData.companyID == Self.companyID else {
      throw .wrongCompany(manufacturerData.companyID)
    }
    try self.init(data: manufacturerData.data)
  }

  /// The manufacturer data that carries this ID (to advertise it).
  public var manufacturerData: ManufacturerData {
    ManufacturerData(companyID: Self.companyID, data: [Self.type, Self.idLength] + id)
  }

  /// The ID as 32 lowercase hex digits.
  public var hex: String { HexBytes.format(id) }

  public var description: String { hex }
}

/// Why manufacturer data is not a FolkBears temporary user ID.
public enum FolkBearsDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The company ID is not 0xFFFF.
  case wrongCompany(UInt16)
  /// Fewer than the 18 bytes the layout needs (after the company ID).
  case tooShort(count: Int)
  /// The type byte is not 0x02.
  case wrongType(UInt8)
  /// The length byte is not 0x10.
  case wrongLength(UInt8)
  /// More bytes than the layout holds.
  case trailingBytes(count: Int)

  public var description: String {
    switch self {
    case .wrongCompany(let id):
      "company \(HexBytes.companyID(id)) is not FolkBears' 0xFFFF"
    case .tooShort(let count):
      "payload is \(count) bytes, a TempUserId needs \(FolkBearsTempUserID.dataLength)"
    case .wrongType(let type):
      "type byte is 0x\(HexBytes.format([type])), expected 0x02"
    case .wrongLength(let length):
      "length byte is 0x\(HexBytes.format([length])), expected 0x10"
    case .trailingBytes(let count):
      "\(count) unexpected bytes after the 16-byte TempUserId"
    }
  }
}
