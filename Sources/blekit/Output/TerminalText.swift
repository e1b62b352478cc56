// TerminalText: the one escaper for text that came from outside (a peer's values, a broker's
// payloads and topics) on its way to a terminal. Standard library only, so that the fuzz target
// compiles this file alone (scripts/fuzz, target terminal-text).

/// What a terminal is shown of text that came from a peer or a broker: such text must not
/// move the cursor, retitle the window, hide earlier output, start a new line that looks like
/// blekit's own, or reorder what follows it on screen.
///
/// Escapes (lowercase hex, unambiguous, so the original can be read back):
/// - `\` itself is written `\\`;
/// - C0 controls (U+0000-U+001F), DEL (U+007F) and C1 controls (U+0080-U+009F) are written
///   `\xHH` with the code point: ESC is `\x1b`, a newline `\x0a`, CSI (U+009B) `\x9b`;
/// - format characters (Unicode general category Cf: the bidi embeddings, overrides and
///   isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F/U+061C, zero-width
///   U+200B-U+200D and U+2060, U+FEFF, the tags U+E0000-U+E007F, ...) and the line and
///   paragraph separators U+2028/U+2029 are written `\u{HHHH}`: U+202E is `\u{202e}`.
///
/// Everything else, other non-ASCII text included, is kept as it is.
enum TerminalText {
  /// `text` on one line: everything listed in the type's description escaped, newline and tab
  /// included. For a field of a table or a line (a name, a value, a gateway).
  static func visible(_ text: String) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    append(text, to: &out, keepingLines: false)
    return String(decoding: out, as: UTF8.self)
  }

  /// `bytes` for a terminal as a block of lines: UTF-8 text escaped as ``visible(_:)`` does
  /// except that newline and tab are kept, with a final newline if it lacks one; bytes that
  /// are not UTF-8 as hex, 16 bytes a line. For a whole message (`blekit receive`).
  static func show(_ bytes: [UInt8]) -> [UInt8] {
    guard let text = String(validating: bytes, as: UTF8.self) else {
      return Array(hexLines(bytes).utf8)
    }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count + 1)
    append(text, to: &out, keepingLines: true)
    if out.last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
    return out
  }

  /// Whether a scalar is written escaped (by ``visible(_:)``; ``show(_:)`` keeps newline and
  /// tab).
  static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
    let value = scalar.value
    if value < 0x20 || (0x7F...0x9F).contains(value) || scalar == "\\" { return true }
    if value < 0xA0 { return false }
    switch scalar.properties.generalCategory {
    case .format, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
  }

  private static func append(_ text: String, to out: inout [UInt8], keepingLines: Bool) {
    for scalar in text.unicodeScalars {
      let value = scalar.value
      if !needsEscape(scalar) || (keepingLines && (scalar == "\n" || scalar == "\t")) {
        if value < 0x80 {
          out.append(UInt8(value))
        } else {
          out.append(contentsOf: String(scalar).utf8)
        }
      } else if scalar == "\\" {
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      } else if value < 0x100 {
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x")])
        out.append(digits[Int(value >> 4)])
        out.append(digits[Int(value & 0x0F)])
      } else {
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "{")])
        out.append(contentsOf: String(value, radix: 16).utf8)
        out.append(UInt8(ascii: "}"))
      }
    }
  }

  private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Hex, 16 bytes a line with the offset: `00000000  de ad be ef`.
  static func hexLines(_ bytes: [UInt8]) -> String {
    guard !bytes.isEmpty else { return "\n" }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 3 + bytes.count / 16 * 10 + 11)
    for start in stride(from: 0, to: bytes.count, by: 16) {
      for shift in stride(from: 28, through: 0, by: -4) {
        out.append(digits[(start >> shift) & 0x0F])
      }
      out.append(UInt8(ascii: " "))
      for byte in bytes[start..<Swift.min(start + 16, bytes.count)] {
        out.append(UInt8(ascii: " "))
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
      }
      out.append(UInt8(ascii: "\n"))
    }
    return String(decoding: out, as: UTF8.self)
  }
}
