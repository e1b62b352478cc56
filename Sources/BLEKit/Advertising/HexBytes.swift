// HexBytes: bytes to hex text and back, for scan output, explore dumps and CLI arguments.

import Bluetooth

/// Hex formatting and parsing of byte strings.
public enum HexBytes {
  /// Lowercase hex, two digits per byte, with an optional separator:
  /// `format([0x02, 0x10])` is `0210`, `format([0x02, 0x10], separator: " ")` is `02 10`.
  public static func format(_ bytes: some Sequence<UInt8>, separator: String = "") -> String {
    let bytes = Array(bytes)
    let gap = Array(separator.utf8)
    guard !bytes.isEmpty else { return "" }
    let length = bytes.count * 2 + (bytes.count - 1) * gap.count
    return String(unsafeUninitializedCapacity: length) { text in
      var at = 0
      for (index, byte) in bytes.enumerated() {
        if index > 0 {
          for character in gap {
            text[at] = character
            at += 1
          }
        }
        text[at] = digits[Int(byte >> 4)]
        text[at + 1] = digits[Int(byte & 0x0F)]
        at += 2
      }
      return at
    }
  }

  /// ASCII `0`-`9`, `a`-`f`, indexed by value.
  private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Parses hex text such as `0210ab`, `02 10 AB`, `02:10:ab` or `0x0210ab`: an optional `0x`
  /// prefix, then hex digit pairs, optionally separated by spaces, colons or dashes.
  ///
  /// - Throws: ``BluetoothError/Code/invalidHexBytes`` naming the input, with the position
  ///   (a byte offset in its UTF-8) where it goes wrong.
  public static func parse(_ text: String) throws(BluetoothError) -> [UInt8] {
    var utf8 = Substring(text).utf8[...]
    if utf8.starts(with: "0x".utf8) || utf8.starts(with: "0X".utf8) { utf8 = utf8.dropFirst(2) }
    var nibbles: [UInt8] = []
    var bytes: [UInt8] = []
    for (position, byte) in zip(utf8.indices, utf8) {
      if let nibble = byte.hexNibble {
        nibbles.append(nibble)
        if nibbles.count == 2 {
          bytes.append(nibbles[0] << 4 | nibbles[1])
          nibbles = []
        }
      } else if [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "-")].contains(byte),
        nibbles.isEmpty
      {
        continue
      } else {
        throw .invalidHexBytes(
          text, offset: text.utf8.distance(from: text.utf8.startIndex, to: position))
      }
    }
    // An odd digit: the text goes wrong at its end.
    guard nibbles.isEmpty else { throw .invalidHexBytes(text, offset: text.utf8.count) }
    return bytes
  }

  /// The bytes as text when they are valid UTF-8 made only of printable characters (no
  /// control characters other than tab, no NUL padding), else `nil`. For showing a value
  /// "as text where printable" next to its hex.
  public static func printableText(_ bytes: [UInt8]) -> String? {
    guard !bytes.isEmpty, let text = String(validating: bytes, as: UTF8.self) else { return nil }
    let printable = text.unicodeScalars.allSatisfy { scalar in
      scalar == "\t"
        || !(scalar.properties.generalCategory == .control
          || scalar.properties.generalCategory == .format
          || scalar.properties.generalCategory == .unassigned
          || scalar.properties.generalCategory == .surrogate)
    }
    return printable ? text : nil
  }

  /// A company ID as `0xFFFF`.
  public static func companyID(_ id: UInt16) -> String {
    let text = String(id, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: 4 - text.count) + text
  }

  /// A UUID as `0x180F` when it has a 16-bit alias, else its canonical form.
  public static func uuidLabel(_ uuid: BluetoothUUID) -> String {
    uuid.uint16Value.map { companyID($0) } ?? uuid.uuidString
  }
}

extension UInt8 {
  fileprivate var hexNibble: UInt8? {
    switch self {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
    default: nil
    }
  }
}
