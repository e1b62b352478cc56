// ADStructure: the length-type-value structures of raw advertising data (Core Specification,
// Vol 3, Part C, 11), parsed without ever reading past the end.

/// One AD structure: a type and its data.
public struct ADStructure: Hashable, Sendable {
  /// AD type "Flags".
  public static let flags: UInt8 = 0x01
  /// AD type "Shortened Local Name".
  public static let shortenedLocalName: UInt8 = 0x08
  /// AD type "Complete Local Name".
  public static let completeLocalName: UInt8 = 0x09
  /// AD type "Manufacturer Specific Data".
  public static let manufacturerSpecificData: UInt8 = 0xFF

  /// The AD type.
  public let type: UInt8
  /// The data after the type byte.
  public let data: [UInt8]

  /// Creates a structure.
  public init(type: UInt8, data: [UInt8]) {
    self.type = type
    self.data = data
  }

  /// The bytes on the air: length (type + data), type, data.
  public var bytes: [UInt8] { [UInt8(truncatingIfNeeded: data.count + 1), type] + data }

  /// The result of parsing raw advertising data.
  public struct ParseResult: Hashable, Sendable {
    /// The structures read before any error.
    public let structures: [ADStructure]
    /// What stopped the parse early, or `nil` when every byte was read.
    public let error: BluetoothError?
  }

  /// Parses raw advertising data (e.g. a 31-byte PDU payload). A zero length byte ends the
  /// significant part (the rest is padding). Never reads past the end: a structure that
  /// claims more bytes than remain stops the parse with an error, keeping what came before.
  public static func parse(_ raw: some Collection<UInt8>) -> ParseResult {
    let bytes = Array(raw)
    var structures: [ADStructure] = []
    var offset = 0
    while offset < bytes.count {
      let length = Int(bytes[offset])
      if length == 0 { break }
      let available = bytes.count - offset - 1
      guard length <= available else {
        return ParseResult(
          structures: structures,
          error: .truncatedStructure(offset: offset, declaredLength: length, available: available))
      }
      structures.append(
        ADStructure(
          type: bytes[offset + 1], data: Array(bytes[(offset + 2)..<(offset + 1 + length)])))
      offset += 1 + length
    }
    return ParseResult(structures: structures, error: nil)
  }
}
