// BluetoothUUID: a 16-, 32- or 128-bit Bluetooth UUID, parsed from text and printed the way
// BlueZ writes it on D-Bus (lowercase, full 128-bit form).

/// A Bluetooth UUID.
///
/// Every UUID is stored as its full 128 bits. A 16- or 32-bit UUID is an alias inside the
/// Bluetooth Base UUID `00000000-0000-1000-8000-00805f9b34fb` (Core Specification, Vol 3,
/// Part B, 2.5.1): `0x180F` is `0000180f-0000-1000-8000-00805f9b34fb`.
///
/// - `uuidString` is the canonical lowercase 128-bit form that BlueZ uses in every D-Bus
///   property and argument (`org.bluez.GattService1.UUID`, `Device1.UUIDs`, ...).
/// - `advertisingBytes` is the shortest form, little-endian, as it travels in advertising data.
public struct BluetoothUUID: RawRepresentable, Hashable, Sendable, Comparable,
  CustomStringConvertible
{
  /// The most significant 64 bits (the first 16 hex digits of the text form).
  public let high: UInt64
  /// The least significant 64 bits (the last 16 hex digits of the text form).
  public let low: UInt64

  /// The low 64 bits shared by every UUID in the Bluetooth Base UUID range.
  static let baseLow: UInt64 = 0x8000_0080_5F9B_34FB
  /// The high 64 bits of the Base UUID with the 32-bit alias field zeroed.
  static let baseHighSuffix: UInt64 = 0x0000_1000

  /// Creates a UUID from its two 64-bit halves, most significant first.
  public init(high: UInt64, low: UInt64) {
    self.high = high
    self.low = low
  }

  /// Creates the 128-bit form of a 16-bit SIG UUID, e.g. `BluetoothUUID(uint16: 0x180F)`.
  public init(uint16 value: UInt16) {
    self.init(uint32: UInt32(value))
  }

  /// Creates the 128-bit form of a 32-bit SIG UUID.
  public init(uint32 value: UInt32) {
    self.init(high: UInt64(value) << 32 | Self.baseHighSuffix, low: Self.baseLow)
  }

  /// Creates a UUID from 16 bytes in text order (big-endian, as the string reads).
  /// Returns `nil` unless there are exactly 16 bytes.
  public init?(bigEndianBytes bytes: some Collection<UInt8>) {
    guard bytes.count == 16 else { return nil }
    var high: UInt64 = 0
    var low: UInt64 = 0
    for (index, byte) in bytes.enumerated() {
      if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
    }
    self.init(high: high, low: low)
  }

  /// Creates a UUID from the bytes of an advertising data field: 2, 4 or 16 bytes,
  /// little-endian (Core Specification Supplement, Part A, 1.1). Returns `nil` for any other
  /// length.
  public init?(advertisingBytes bytes: some Collection<UInt8>) {
    let bigEndian = Array(bytes.reversed())
    switch bigEndian.count {
    case 2, 4: self.init(uint32: bigEndian.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
    case 16: self.init(bigEndianBytes: bigEndian)
    default: return nil
    }
  }

  /// Parses a UUID written as 4 hex digits (`180F`), 8 hex digits (`0000180F`), either with an
  /// optional `0x` prefix, or the 36-character 8-4-4-4-12 form; hex digits in any case.
  ///
  /// - Throws: `BluetoothUUID.ParseError` naming the input and the accepted forms.
  public init(_ text: String) throws(ParseError) {
    // Read in place: UUIDs arrive with every advertisement, so no arrays are built here.
    var text = text
    let parsed = text.withUTF8 { Self.parse($0) }
    guard let (high, low) = parsed else { throw ParseError(input: text) }
    self.init(high: high, low: low)
  }

  /// The two halves of the UUID written in `digits` (see ``init(_:)``), or `nil`.
  private static func parse(_ digits: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64)? {
    var digits = digits[...]
    let hasPrefix =
      digits.count >= 2 && digits[digits.startIndex] == UInt8(ascii: "0")
      && digits[digits.startIndex + 1] | 0x20 == UInt8(ascii: "x")
    if hasPrefix { digits = digits.dropFirst(2) }
    switch digits.count {
    case 4, 8:
      var alias: UInt64 = 0
      for byte in digits {
        guard let nibble = byte.hexValue else { return nil }
        alias = alias << 4 | UInt64(nibble)
      }
      return (alias << 32 | baseHighSuffix, baseLow)
    case 36 where !hasPrefix:
      var high: UInt64 = 0
      var low: UInt64 = 0
      var nibbles = 0
      for (index, byte) in digits.enumerated() {
        if index == 8 || index == 13 || index == 18 || index == 23 {
          guard byte == UInt8(ascii: "-") else { return nil }
          continue
        }
        guard let nibble = byte.hexValue else { return nil }
        if nibbles < 16 {
          high = high << 4 | UInt64(nibble)
        } else {
          low = low << 4 | UInt64(nibble)
        }
        nibbles += 1
      }
      return (high, low)
    default:
      return nil
    }
  }

  /// The canonical lowercase 128-bit form, e.g. `0000180f-0000-1000-8000-00805f9b34fb`.
  /// This is the form BlueZ uses on D-Bus.
  public var uuidString: String {
    String(unsafeUninitializedCapacity: 36) { text in
      var at = 0
      for digit in 0..<32 {
        // Dashes before the 9th, 13th, 17th and 21st digit (8-4-4-4-12).
        if digit == 8 || digit == 12 || digit == 16 || digit == 20 {
          text[at] = UInt8(ascii: "-")
          at += 1
        }
        text[at] = Self.hexDigit(digit < 16 ? high : low, at: digit % 16, of: 16)
        at += 1
      }
      return at
    }
  }

  /// The canonical 128-bit form (same as `uuidString`).
  public var description: String { uuidString }

  /// The canonical 128-bit form (same as `uuidString`).
  public var rawValue: String { uuidString }

  /// Parses any accepted text form; `nil` when it is not a UUID.
  public init?(rawValue: String) {
    guard let uuid = try? BluetoothUUID(rawValue) else { return nil }
    self = uuid
  }

  /// Whether this UUID lies in the Bluetooth Base UUID range (a 16- or 32-bit alias).
  public var isInBaseRange: Bool {
    low == Self.baseLow && high & 0xFFFF_FFFF == Self.baseHighSuffix
  }

  /// The 32-bit alias, when the UUID is in the Base UUID range.
  public var uint32Value: UInt32? {
    isInBaseRange ? UInt32(truncatingIfNeeded: high >> 32) : nil
  }

  /// The 16-bit alias, when the UUID is in the Base UUID range and its alias fits 16 bits.
  public var uint16Value: UInt16? {
    guard let value = uint32Value, value <= UInt32(UInt16.max) else { return nil }
    return UInt16(value)
  }

  /// The shortest text form: `180f` for a 16-bit alias, `1234abcd` for a 32-bit alias,
  /// otherwise the full 128-bit form. Lowercase.
  public var shortString: String {
    if let short = uint16Value { return Self.hex(UInt64(short), digits: 4) }
    if let short = uint32Value { return Self.hex(UInt64(short), digits: 8) }
    return uuidString
  }

  /// How many bytes the UUID takes in advertising data: 2, 4 or 16.
  public var advertisingSize: Int {
    if uint16Value != nil { return 2 }
    if uint32Value != nil { return 4 }
    return 16
  }

  /// The shortest form in little-endian byte order, as it travels in advertising data.
  public var advertisingBytes: [UInt8] {
    guard let alias = uint32Value else { return bigEndianBytes.reversed() }
    return (0..<advertisingSize).map { UInt8(truncatingIfNeeded: alias >> (8 * $0)) }
  }

  /// The 16 bytes in text order (big-endian).
  public var bigEndianBytes: [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
      + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
  }

  // Compare and hash the bits, not the text (RawRepresentable would default to the text).
  public static func == (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
    lhs.high == rhs.high && lhs.low == rhs.low
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(high)
    hasher.combine(low)
  }

  public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
    (lhs.high, lhs.low) < (rhs.high, rhs.low)
  }

  private static func hex(_ value: UInt64, digits: Int) -> String {
    String(unsafeUninitializedCapacity: digits) { text in
      for index in 0..<digits { text[index] = hexDigit(value, at: index, of: digits) }
      return digits
    }
  }

  /// The lowercase ASCII hex digit at `index` (0 = most significant) of `value` written with
  /// `digits` digits.
  @inline(__always)
  private static func hexDigit(_ value: UInt64, at index: Int, of digits: Int) -> UInt8 {
    lowercaseHexDigits[Int(truncatingIfNeeded: value >> (4 * (digits - 1 - index))) & 0xF]
  }

  /// The error thrown when text is not a UUID.
  public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text that was rejected.
    public let input: String

    /// Creates the error for rejected text.
    public init(input: String) { self.input = input }

    public var description: String {
      "invalid UUID \"\(input)\": expected 4 or 8 hex digits (180F, 0x180F) or the "
        + "128-bit form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    }
  }
}

/// `0`-`9`, `a`-`f` as ASCII, by value.
let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)
/// `0`-`9`, `A`-`F` as ASCII, by value.
let uppercaseHexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

extension UInt8 {
  /// The value of an ASCII hex digit, or `nil`.
  var hexValue: UInt8? {
    switch self {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
