// The JSON reader behind `blekit serve`'s profiles: objects keep their key order and syntax
// errors say line and column (no Foundation).

/// A JSON value as a profile file holds it.
indirect enum ProfileJSON: Equatable, Sendable {
  case string(String)
  /// A number, kept as written so integers stay exact.
  case number(String)
  case bool(Bool)
  case null
  case array([ProfileJSON])
  case object([(key: String, value: ProfileJSON)])

  static func == (lhs: ProfileJSON, rhs: ProfileJSON) -> Bool {
    switch (lhs, rhs) {
    case (.string(let a), .string(let b)): a == b
    case (.number(let a), .number(let b)): a == b
    case (.bool(let a), .bool(let b)): a == b
    case (.null, .null): true
    case (.array(let a), .array(let b)): a == b
    case (.object(let a), .object(let b)):
      a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    default: false
    }
  }

  /// What the value is, for messages ("a string", "an object").
  var kind: String {
    switch self {
    case .string: "a string"
    case .number: "a number"
    case .bool: "a boolean"
    case .null: "null"
    case .array: "an array"
    case .object: "an object"
    }
  }

  /// A syntax error at a line and column (both from 1).
  struct SyntaxError: Error, Equatable {
    var line: Int
    var column: Int
    var reason: String
  }

  /// Parses one JSON document (RFC 8259), nesting at most 64 deep.
  static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> ProfileJSON {
    var reader = Reader(bytes: bytes)
    reader.skipSpace()
    let value = try reader.value(depth: 0)
    reader.skipSpace()
    guard reader.index == bytes.count else { throw reader.error("unexpected text after the end") }
    return value
  }

  private struct Reader {
    let bytes: [UInt8]
    var index = 0

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

    mutating func value(depth: Int) throws(SyntaxError) -> ProfileJSON {
      guard depth < 64 else { throw error("nested more than 64 deep") }
      guard let byte = current else { throw error("unexpected end of file") }
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

    mutating func literal(_ word: String, _ value: ProfileJSON) throws(SyntaxError)
      -> ProfileJSON
    {
      let word = Array(word.utf8)
      guard bytes.count - index >= word.count, Array(bytes[index..<index + word.count]) == word
      else { throw error("expected a value") }
      index += word.count
      return value
    }

    mutating func object(depth: Int) throws(SyntaxError) -> ProfileJSON {
      index += 1
      var fields: [(key: String, value: ProfileJSON)] = []
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
        if fields.contains(where: { $0.key == key }) {
          index = keyStart
          throw error("key '\(key)' given twice")
        }
        skipSpace()
        try expect(UInt8(ascii: ":"), "':' after the key")
        skipSpace()
        fields.append((key, try value(depth: depth + 1)))
        skipSpace()
        if current == UInt8(ascii: ",") {
          index += 1
          continue
        }
        try expect(UInt8(ascii: "}"), "',' or '}'")
        return .object(fields)
      }
    }

    mutating func array(depth: Int) throws(SyntaxError) -> ProfileJSON {
      index += 1
      var items: [ProfileJSON] = []
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

    mutating func number() throws(SyntaxError) -> ProfileJSON {
      let start = index
      if current == UInt8(ascii: "-") { index += 1 }
      func digits(_ reader: inout Reader) -> Int {
        var count = 0
        while let byte = reader.current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
          reader.index += 1
          count += 1
        }
        return count
      }
      guard digits(&self) > 0 else { throw error("expected a digit") }
      if current == UInt8(ascii: ".") {
        index += 1
        guard digits(&self) > 0 else { throw error("expected a digit after '.'") }
      }
      if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
        index += 1
        if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
        guard digits(&self) > 0 else { throw error("expected a digit in the exponent") }
      }
      return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    mutating func string() throws(SyntaxError) -> String {
      index += 1
      var out: [UInt8] = []
      while true {
        guard let byte = current else { throw error("unterminated string") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""):
          return String(decoding: out, as: UTF8.self)
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
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
              guard current == UInt8(ascii: "\\") else { throw error("lone surrogate") }
              index += 1
              try expect(UInt8(ascii: "u"), "a low surrogate")
              let low = try hex4()
              guard (0xDC00..<0xE000).contains(low) else { throw error("bad surrogate pair") }
              scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("bad \\u escape") }
            out.append(contentsOf: Array(String(Character(unicode)).utf8))
          default:
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
