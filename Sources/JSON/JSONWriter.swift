// Writing JSON text: compact (one line) or indented, with one string escaper that leaves
// nothing a terminal acts on raw.

extension JSONValue {
  /// Compact JSON text: no spaces, members in order, numbers other than integers to at most
  /// 3 decimals (see ``appendNumber(_:to:)``).
  public var text: String {
    var out: [UInt8] = []
    write(to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  /// Appends the compact JSON text, as UTF-8.
  public func write(to out: inout [UInt8]) {
    switch self {
    case .string(let text): Self.appendQuoted(text, to: &out)
    case .number(let number): Self.appendNumber(number, to: &out)
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
        Self.appendQuoted(field.key, to: &out)
        out.append(UInt8(ascii: ":"))
        field.value.write(to: &out)
      }
      out.append(UInt8(ascii: "}"))
    }
  }

  /// Appends a number rounded to 3 decimals (milliseconds of a timestamp, a rate): a whole
  /// result as an integer (`12`, not `12.0`), any other as Swift writes a `Double` (`12.5`).
  /// From 1e15 in magnitude on, where thousandths mean nothing and scaling could overflow, the
  /// number is written as it is (`1e+300`); not finite, it is written `null`.
  public static func appendNumber(_ number: Double, to out: inout [UInt8]) {
    let scaled = abs(number) < 1e15 ? (number * 1000).rounded() / 1000 : number
    if !scaled.isFinite {
      out.append(contentsOf: "null".utf8)
    } else if scaled == scaled.rounded() && abs(scaled) < 1e15 {
      out.append(contentsOf: String(Int(scaled)).utf8)
    } else {
      out.append(contentsOf: String(scaled).utf8)
    }
  }

  /// `text` as a JSON string literal (see ``appendQuoted(_:to:)``).
  public static func quoted(_ text: String) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count + 2)
    appendQuoted(text, to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  /// Appends `text` as a JSON string literal, as UTF-8. Besides what JSON requires (quotes,
  /// backslashes, C0 controls; `\n`, `\r` and `\t` by name), DEL, the C1 controls, format
  /// characters (Unicode general category Cf: bidi overrides and isolates, zero-width
  /// characters, tags) and U+2028/U+2029 are written as lowercase `\uXXXX` escapes (a
  /// surrogate pair beyond the BMP), so JSON shown on a terminal cannot drive it: a string's
  /// ESC stays the six characters `\u001b`. Everything else, other non-ASCII included, is
  /// copied as it is.
  public static func appendQuoted(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
      case "\\": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
      case "\n": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
      case "\r": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
      case "\t": out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
      case _ where escapedInText(scalar):
        if scalar.value > 0xFFFF {
          let offset = scalar.value - 0x10000
          appendEscape(0xD800 + (offset >> 10), to: &out)
          appendEscape(0xDC00 + (offset & 0x3FF), to: &out)
        } else {
          appendEscape(scalar.value, to: &out)
        }
      case _ where scalar.value < 0x80: out.append(UInt8(scalar.value))
      default: out.append(contentsOf: String(scalar).utf8)
      }
    }
    out.append(UInt8(ascii: "\""))
  }

  /// Whether the writer escapes a scalar that JSON would allow raw (see ``appendQuoted(_:to:)``):
  /// C0 controls, DEL, C1 controls, format characters and the line and paragraph separators.
  public static func escapedInText(_ scalar: Unicode.Scalar) -> Bool {
    let value = scalar.value
    if value < 0x20 || (0x7F...0x9F).contains(value) { return true }
    if value < 0xA0 { return false }
    switch scalar.properties.generalCategory {
    case .format, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
  }

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Appends `\u` and four lowercase hex digits of a UTF-16 code unit.
  private static func appendEscape(_ unit: UInt32, to out: inout [UInt8]) {
    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u")])
    for shift in stride(from: 12, through: 0, by: -4) {
      out.append(hexDigits[Int((unit >> UInt32(shift)) & 0x0F)])
    }
  }

  // MARK: Indented

  /// Indented JSON text, for a file a person edits (`blekit clone`'s profiles): an object
  /// holding a non-empty object or array, and an array holding one or written longer than
  /// `inlineLimit` on one line, take a line per member, indented two spaces a level, with
  /// `": "` after keys; everything else is written as ``text`` on one line.
  public func indentedText(inlineLimit: Int = 80) -> String {
    indented(indent: "", inlineLimit: inlineLimit)
  }

  private func indented(indent: String, inlineLimit: Int) -> String {
    let inner = indent + "  "
    switch self {
    case .object(let fields) where fields.contains(where: { $0.value.isContainer }):
      let lines = fields.map {
        inner + Self.quoted($0.key) + ": "
          + $0.value.indented(indent: inner, inlineLimit: inlineLimit)
      }
      return "{\n" + lines.joined(separator: ",\n") + "\n" + indent + "}"
    case .array(let items)
    where items.contains(where: \.isContainer) || text.count > inlineLimit:
      let lines = items.map { inner + $0.indented(indent: inner, inlineLimit: inlineLimit) }
      return "[\n" + lines.joined(separator: ",\n") + "\n" + indent + "]"
    default:
      return text
    }
  }

  /// A non-empty object or array.
  private var isContainer: Bool {
    switch self {
    case .object(let fields): !fields.isEmpty
    case .array(let items): !items.isEmpty
    default: false
    }
  }
}
