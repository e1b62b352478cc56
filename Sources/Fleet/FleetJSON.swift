// FleetJSON: the JSON values of fleet payloads: writing them compactly, and reading them back
// (the aggregator's side), without Foundation.

/// A JSON value, objects keeping their key order.
public indirect enum FleetJSON: Sendable, Hashable {
  case string(String)
  case number(Double)
  case int(Int)
  case bool(Bool)
  case null
  case array([FleetJSON])
  case object([Field])

  /// One member of an object.
  public struct Field: Sendable, Hashable {
    public var key: String
    public var value: FleetJSON
    public init(_ key: String, _ value: FleetJSON) {
      self.key = key
      self.value = value
    }
  }

  /// The member named `key` of an object.
  public subscript(key: String) -> FleetJSON? {
    guard case .object(let fields) = self else { return nil }
    return fields.first { $0.key == key }?.value
  }

  /// The value as a string, if it is one.
  public var stringValue: String? {
    if case .string(let text) = self { return text }
    return nil
  }

  /// The value as a number (an integer or not).
  public var doubleValue: Double? {
    switch self {
    case .number(let value): value
    case .int(let value): Double(value)
    default: nil
    }
  }

  /// The value as an integer, if it is a whole number.
  public var intValue: Int? {
    switch self {
    case .int(let value): value
    case .number(let value) where value == value.rounded() && abs(value) < 1e15: Int(value)
    default: nil
    }
  }

  /// Compact JSON text (numbers other than integers to at most 3 decimals).
  public var text: String {
    var out: [UInt8] = []
    write(to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  private func write(to out: inout [UInt8]) {
    switch self {
    case .string(let text): Self.writeQuoted(text, to: &out)
    case .number(let number):
      // Beyond 1e15 milliseconds mean nothing and scaling could overflow: written as it is.
      let scaled = abs(number) < 1e15 ? (number * 1000).rounded() / 1000 : number
      if !scaled.isFinite {
        out.append(contentsOf: "null".utf8)
      } else if scaled == scaled.rounded() && abs(scaled) < 1e15 {
        out.append(contentsOf: String(Int(scaled)).utf8)
      } else {
        out.append(contentsOf: String(scaled).utf8)
      }
    case .int(let number): out.append(contentsOf: String(number).utf8)
    case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
    case .null: out.append(contentsOf: "null".utf8)
    case .array(let items):
      out.append(UInt8(ascii: "["))
      for (index, item) in items.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        item.write(to: &out)
      }
      out.append(UInt8(ascii: "]"))
    case .object(let fields):
      out.append(UInt8(ascii: "{"))
      for (index, field) in fields.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        Self.writeQuoted(field.key, to: &out)
        out.append(UInt8(ascii: ":"))
        field.value.write(to: &out)
      }
      out.append(UInt8(ascii: "}"))
    }
  }

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Writes a JSON string. Besides what JSON requires (quotes, backslashes, C0 controls),
  /// DEL, C1 controls, format characters (Unicode general category Cf: bidi overrides and
  /// isolates, zero-width characters, tags) and U+2028/U+2029 are written as `\uXXXX`
  /// escapes (surrogate pairs beyond the BMP), so JSON printed on a terminal cannot drive it:
  /// a payload's `"\u001b"` stays six characters.
  private static func writeQuoted(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out.append(contentsOf: "\\\"".utf8)
      case "\\": out.append(contentsOf: "\\\\".utf8)
      case "\n": out.append(contentsOf: "\\n".utf8)
      case "\r": out.append(contentsOf: "\\r".utf8)
      case "\t": out.append(contentsOf: "\\t".utf8)
      case _ where escapedInText(scalar):
        if scalar.value > 0xFFFF {
          let offset = scalar.value - 0x10000
          writeEscape(0xD800 + (offset >> 10), to: &out)
          writeEscape(0xDC00 + (offset & 0x3FF), to: &out)
        } else {
          writeEscape(scalar.value, to: &out)
        }
      case _ where scalar.value < 0x80: out.append(UInt8(scalar.value))
      default: out.append(contentsOf: String(scalar).utf8)
      }
    }
    out.append(UInt8(ascii: "\""))
  }

  /// Whether the writer escapes a scalar that JSON would allow raw (see `writeQuoted`).
  static func escapedInText(_ scalar: Unicode.Scalar) -> Bool {
    let value = scalar.value
    if value < 0x20 || (0x7F...0x9F).contains(value) { return true }
    if value < 0xA0 { return false }
    switch scalar.properties.generalCategory {
    case .format, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
  }

  private static func writeEscape(_ unit: UInt32, to out: inout [UInt8]) {
    out.append(contentsOf: "\\u".utf8)
    for shift in stride(from: 12, through: 0, by: -4) {
      out.append(hexDigits[Int((unit >> UInt32(shift)) & 0x0F)])
    }
  }

  // MARK: Reading

  /// Parses JSON text; `nil` when it is not one well-formed JSON value (RFC 8259), when it is
  /// nested more than 32 deep, or when a number is beyond `Double`'s range. Strings are
  /// decoded as they are (a `\u001b` becomes U+001B): what shows them on a terminal escapes
  /// them there.
  public static func parse(_ bytes: [UInt8]) -> FleetJSON? {
    var reader = Reader(bytes: bytes)
    guard let value = reader.value(depth: 0) else { return nil }
    reader.skipSpace()
    return reader.index == bytes.count ? value : nil
  }

  /// Parses JSON text.
  public static func parse(_ text: String) -> FleetJSON? { parse(Array(text.utf8)) }

  private struct Reader {
    let bytes: [UInt8]
    var index = 0

    mutating func skipSpace() {
      while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func literal(_ word: String) -> Bool {
      let word = Array(word.utf8)
      guard bytes.count - index >= word.count, Array(bytes[index..<index + word.count]) == word
      else { return false }
      index += word.count
      return true
    }

    mutating func value(depth: Int) -> FleetJSON? {
      guard depth < 32 else { return nil }
      skipSpace()
      guard index < bytes.count else { return nil }
      switch bytes[index] {
      case UInt8(ascii: "{"):
        index += 1
        var fields: [Field] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
          index += 1
          return .object(fields)
        }
        while true {
          skipSpace()
          guard let key = string() else { return nil }
          skipSpace()
          guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
          index += 1
          guard let item = value(depth: depth + 1) else { return nil }
          fields.append(Field(key, item))
          skipSpace()
          guard index < bytes.count else { return nil }
          if bytes[index] == UInt8(ascii: ",") {
            index += 1
            continue
          }
          guard bytes[index] == UInt8(ascii: "}") else { return nil }
          index += 1
          return .object(fields)
        }
      case UInt8(ascii: "["):
        index += 1
        var items: [FleetJSON] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
          index += 1
          return .array(items)
        }
        while true {
          guard let item = value(depth: depth + 1) else { return nil }
          items.append(item)
          skipSpace()
          guard index < bytes.count else { return nil }
          if bytes[index] == UInt8(ascii: ",") {
            index += 1
            continue
          }
          guard bytes[index] == UInt8(ascii: "]") else { return nil }
          index += 1
          return .array(items)
        }
      case UInt8(ascii: "\""):
        return string().map { .string($0) }
      case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
      case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
      case UInt8(ascii: "n"): return literal("null") ? .null : nil
      default: return number()
      }
    }

    /// A number as JSON writes it (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`): an
    /// integer that fits `Int` as `.int`, anything else as `.number`. A number beyond
    /// `Double`'s range (`1e400`) is refused: every value read is finite.
    mutating func number() -> FleetJSON? {
      let start = index
      var integral = true
      if peek(UInt8(ascii: "-")) { index += 1 }
      if peek(UInt8(ascii: "0")) {
        index += 1
      } else {
        guard digits() > 0 else { return nil }
      }
      if peek(UInt8(ascii: ".")) {
        index += 1
        integral = false
        guard digits() > 0 else { return nil }
      }
      if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
        index += 1
        integral = false
        if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
        guard digits() > 0 else { return nil }
      }
      let text = String(decoding: bytes[start..<index], as: UTF8.self)
      if integral, let whole = Int(text) { return .int(whole) }
      guard let value = Double(text), value.isFinite else { return nil }
      return .number(value)
    }

    func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

    /// Skips ASCII digits; returns how many.
    mutating func digits() -> Int {
      let start = index
      while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
        index += 1
      }
      return index - start
    }

    /// Four hex digits after `\u`, as a UTF-16 code unit.
    mutating func hexUnit() -> UInt32? {
      guard bytes.count - index >= 4 else { return nil }
      var unit: UInt32 = 0
      for byte in bytes[index..<index + 4] {
        let digit: UInt8
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
        default: return nil
        }
        unit = unit << 4 | UInt32(digit)
      }
      index += 4
      return unit
    }

    mutating func string() -> String? {
      guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
      index += 1
      var out: [UInt8] = []
      while index < bytes.count {
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
        case UInt8(ascii: "\\"):
          guard index < bytes.count else { return nil }
          let escaped = bytes[index]
          index += 1
          switch escaped {
          case UInt8(ascii: "n"): out.append(0x0A)
          case UInt8(ascii: "r"): out.append(0x0D)
          case UInt8(ascii: "t"): out.append(0x09)
          case UInt8(ascii: "b"): out.append(0x08)
          case UInt8(ascii: "f"): out.append(0x0C)
          case UInt8(ascii: "u"):
            guard let unit = hexUnit() else { return nil }
            var scalar = Unicode.Scalar(unit)
            // A high surrogate followed by `\uDC00`-`\uDFFF` is one scalar beyond the BMP; a
            // lone half reads as U+FFFD.
            if (0xD800...0xDBFF).contains(unit), bytes.count - index >= 6,
              bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            {
              let mark = index
              index += 2
              if let low = hexUnit(), (0xDC00...0xDFFF).contains(low) {
                scalar = Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
              } else {
                index = mark
              }
            }
            out.append(contentsOf: String(scalar ?? "\u{FFFD}").utf8)
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
          default: return nil
          }
        case 0..<0x20: return nil
        default: out.append(byte)
        }
      }
      return nil
    }
  }
}
