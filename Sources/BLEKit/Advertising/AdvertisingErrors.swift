// AdvertisingErrors: BluetoothError's codes for advertising bytes that cannot be decoded and
// hex text that cannot be parsed.

extension BluetoothError.Code {
  /// A field of advertising data has fewer bytes than its layout needs
  /// (``BluetoothError/field``; ``BluetoothError/size`` bytes, ``BluetoothError/limit``
  /// needed).
  public static let advertisingFieldTooShort = Self(rawValue: "advertisingFieldTooShort")
  /// An AD structure's length byte runs past the end of the data (``BluetoothError/offset``
  /// of the structure; ``BluetoothError/size`` bytes declared, ``BluetoothError/limit``
  /// available).
  public static let truncatedADStructure = Self(rawValue: "truncatedADStructure")
  /// An AD type that does not carry what was asked for (``BluetoothError/adType``).
  public static let unexpectedADType = Self(rawValue: "unexpectedADType")
  /// A service data UUID of a size other than 2, 4 or 16 bytes (``BluetoothError/size``).
  public static let invalidUUIDLength = Self(rawValue: "invalidUUIDLength")
  /// Text that is not hex bytes (``BluetoothError/input``; ``BluetoothError/offset`` is where
  /// it goes wrong, in bytes of its UTF-8).
  public static let invalidHexBytes = Self(rawValue: "invalidHexBytes")
}

extension BluetoothError {
  /// A field of `count` bytes where its layout needs `needed`.
  package static func tooShort(field: String, count: Int, needed: Int) -> BluetoothError {
    var error = BluetoothError(
      .advertisingFieldTooShort, "\(field) is \(count) bytes, needs at least \(needed)")
    error.field = field
    error.size = count
    error.limit = needed
    return error
  }

  /// An AD structure at `offset` declaring more bytes than remain.
  package static func truncatedStructure(offset: Int, declaredLength: Int, available: Int)
    -> BluetoothError
  {
    var error = BluetoothError(
      .truncatedADStructure,
      "AD structure at offset \(offset) declares \(declaredLength) bytes, only \(available) remain")
    error.offset = offset
    error.size = declaredLength
    error.limit = available
    return error
  }

  /// An AD type that does not carry what was asked for.
  package static func unexpectedType(_ type: UInt8) -> BluetoothError {
    var error = BluetoothError(.unexpectedADType, "unexpected AD type 0x\(HexBytes.format([type]))")
    error.adType = type
    return error
  }

  /// A service data UUID of `length` bytes.
  package static func invalidUUIDLength(_ length: Int) -> BluetoothError {
    var error = BluetoothError(
      .invalidUUIDLength, "a UUID of \(length) bytes (expected 2, 4 or 16)")
    error.size = length
    return error
  }

  /// `input`, which is not hex bytes from character `offset` on.
  package static func invalidHexBytes(_ input: String, offset: Int) -> BluetoothError {
    var error = BluetoothError(
      .invalidHexBytes,
      "invalid hex bytes \"\(input)\": expected pairs of hex digits, e.g. 0210ab or 02:10:ab")
    error.input = input
    error.offset = offset
    return error
  }
}
