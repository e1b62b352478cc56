// Reading JSON text (RFC 8259) from bytes that may come from anyone (a broker, a downloaded
// profile): strict, bounded in depth, and a refusal says line, column and why.

extension JSONValue {
  /// Why a text is not one JSON value, at a line and column (both from 1; a column counts
  /// UTF-8 sequences, not bytes).
  public struct SyntaxError: Error, Equatable, Sendable {
    public var line: Int
    public var column: Int
    public var reason: String
    public init(line: Int, column: Int, reason: String) {
      self.line = line
      self.column = column
      self.reason = reason
    }
  }

  /// Parses one JSON value (RFC 8259), with space around it allowed. Refused besides what the
  /// grammar refuses: a value nested more than `maximumDepth` levels deep (the outermost value
  /// is level 1, what an array or object holds one level deeper than it); a key given
  /// twice in one object (readers disagree on which one counts); a number beyond `Double`'s
  /// range (`1e400`: every number read is finite); a string that is not UTF-8, or whose
  /// `\u` escapes leave a surrogate unpaired. An integer that fits `Int` reads as `.int`,
  /// any other number as `.number`. Strings are decoded as they are (`"\u001b"` is U+001B):
  /// what shows them on a terminal escapes them there.
  public static func parse(_ bytes: [UInt8], maximumDepth: Int) throws(SyntaxError) -> JSONValue {
    var reader = Reader(bytes: bytes, maximumDepth: maximumDepth)
    reader.skipSpace()
    let value = try reader.value(depth: 0)
    reader.skipSpace()
    guard reader.index == bytes.count else { throw reader.error("unexpected text after the end") }
    return value
  }

  /// Parses JSON text (see ``parse(_:maximumDepth:)-([UInt8],_)``).
  public static func parse(_ text: String, maximumDepth: Int) throws(SyntaxError) -> JSONValue {
    try parse(Array(text.utf8), maximumDepth: maximumDepth)
  }

  private struct Reader {
    let bytes: [UInt8]
    let maximumDepth: Int
    var index = 0

    init(bytes: [UInt8], maximumDepth: Int) {
      self.bytes = bytes
      self.maximumDepth = maximumDepth
    }

    /// A refusal at the current position.
    func error(_ reason: String) -> SyntaxError {
      var line = 1
      var column = 1
      for byte in bytes[..<min(index, bytes.count)] {
        if byte == UInt8(ascii: "\n") {
          line += 1
          column = 1
        } else if byte & 0xC0 != 0x80 {
          column += 1
        }
      }
      return SyntaxError(line: line, column: column, reason: reason)
    }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
      while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
        index += 1
      }
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(SyntaxError) {
      guard current == byte else { throw error("expected \(what)") }
      index += 1
    }

    /// A value inside `depth` arrays and objects.
    mutating func value(depth: Int) throws(SyntaxError) -> JSONValue {
      guard depth < maximumDepth else { throw error("nested more than \(maximumDepth) deep") }
      guard let byte = current else { throw error("unexpected end of text") }
      switch byte {
      case UInt8(ascii: "{"): return try object(depth: depth)
      case UInt8(ascii: "["): return try array(depth: depth)
      case UInt8(ascii: "\""): return .string(try string())
      case UInt8(ascii: "t"): return try literal("true", .bool(true))
      case UInt8(ascii: "f"): return try literal("false", .bool(false))
      case UInt8(ascii: "n"): return try literal("null", .null)
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
      default: throw error("expected a value")
      }
    }

    mutating func literal(_ word: StaticString, _ value: JSONValue) throws(SyntaxError)
      -> JSONValue
    {
      let count = word.utf8CodeUnitCount
      guard bytes.count - index >= count,
        word.withUTF8Buffer({ bytes[index..<index + count].elementsEqual($0) })
      else { throw error("expected a value") }
      index += count
      return value
    }

    mutating func object(depth: Int) throws(SyntaxError) -> JSONValue {
      index += 1
      var fields: [Field] = []
      var keys: Set<String> = []
      skipSpace()
      if current == UInt8(ascii: "}") {
        index += 1
        return .object(fields)
      }
      while true {
        skipSpace()
        guard current == UInt8(ascii: "\"") else { throw error("expected a key in quotes") }
        let keyStart = index
        let key = try string()
        guard keys.insert(key).inserted else {
          index = keyStart
          throw error("key '\(key)' given twice")
        }
        skipSpace()
        try expect(UInt8(ascii: ":"), "':' after the key")
        skipSpace()
        fields.append(Field(key, try value(depth: depth + 1)))
        skipSpace()
        if current == UInt8(ascii: ",") {
          index += 1
          continue
        }
        try expect(UInt8(ascii: "}"), "',' or '}'")
        return .object(fields)
      }
    }

    mutating func array(depth: Int) throws(SyntaxError) -> JSONValue {
      index += 1
      var items: [JSONValue] = []
      skipSpace()
      if current == UInt8(ascii: "]") {
        index += 1
        return .array(items)
      }
      while true {
        skipSpace()
        items.append(try value(depth: depth + 1))
        skipSpace()
        if current == UInt8(ascii: ",") {
          index += 1
          continue
        }
        try expect(UInt8(ascii: "]"), "',' or ']'")
        return .array(items)
      }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: an integer that fits `Int` as
    /// `.int`, any other finite number as `.number`.
    mutating func number() throws(SyntaxError) -> JSONValue {
      let start = index
      var integral = true
      if current == UInt8(ascii: "-") { index += 1 }
      if current == UInt8(ascii: "0") {
        index += 1
      } else {
        guard digits() > 0 else { throw error("expected a digit") }
      }
      if current == UInt8(ascii: ".") {
        index += 1
        integral = false
        guard digits() > 0 else { throw error("expected a digit after '.'") }
      }
      if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
        index += 1
        integral = false
        if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
        guard digits() > 0 else { throw error("expected a digit in the exponent") }
      }
      let text = String(decoding: bytes[start..<index], as: UTF8.self)
      if integral, let whole = Int(text) { return .int(whole) }
      guard let value = Double(text), value.isFinite else {
        index = start
        throw error("number out of range")
      }
      return .number(value)
    }

    /// Skips ASCII digits; returns how many.
    mutating func digits() -> Int {
      let start = index
      while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
        index += 1
      }
      return index - start
    }

    mutating func string() throws(SyntaxError) -> String {
      let start = index
      index += 1
      var out: [UInt8] = []
      while true {
        guard let byte = current else { throw error("unterminated string") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""):
          guard let text = String(validating: out, as: UTF8.self) else {
            index = start
            throw error("a string that is not UTF-8")
          }
          return text
        case UInt8(ascii: "\\"):
          guard let escaped = current else { throw error("unterminated string") }
          index += 1
          switch escaped {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
          case UInt8(ascii: "b"): out.append(0x08)
          case UInt8(ascii: "f"): out.append(0x0C)
          case UInt8(ascii: "n"): out.append(0x0A)
          case UInt8(ascii: "r"): out.append(0x0D)
          case UInt8(ascii: "t"): out.append(0x09)
          case UInt8(ascii: "u"):
            let escapeStart = index - 2
            var unit = try hex4()
            // A high surrogate and a low one after it are one scalar beyond the BMP; a half
            // alone is no character at all.
            if (0xD800..<0xDC00).contains(unit), current == UInt8(ascii: "\\"),
              index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
            {
              index += 2
              let low = try hex4()
              if (0xDC00..<0xE000).contains(low) {
                unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
              }
            }
            guard let scalar = Unicode.Scalar(unit) else {
              index = escapeStart
              throw error("lone surrogate")
            }
            out.append(contentsOf: String(scalar).utf8)
          default:
            index -= 2
            throw error("unknown escape '\\\(Character(Unicode.Scalar(escaped)))'")
          }
        case 0..<0x20:
          index -= 1
          throw error("control character in a string")
        default:
          out.append(byte)
        }
      }
    }

    /// Four hex digits after `\u`, as a UTF-16 code unit.
    mutating func hex4() throws(SyntaxError) -> UInt32 {
      var value: UInt32 = 0
      for _ in 0..<4 {
        guard let byte = current, let digit = Self.hexDigit(byte) else {
          throw error("expected 4 hex digits after \\u")
        }
        value = value << 4 | UInt32(digit)
        index += 1
      }
      return value
    }

    static func hexDigit(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: nil
      }
    }
  }
}
