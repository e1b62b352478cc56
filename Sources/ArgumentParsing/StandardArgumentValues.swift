// ExpressibleByArgument conformances for the standard library's strings, numbers and Duration.

extension String: ExpressibleByArgument {
  public init(argument: String) throws(ArgumentValueError) {
    self = argument
  }
}

extension ExpressibleByArgument where Self: FixedWidthInteger {
  /// Accepts decimal (`-50`, `+7`) and hexadecimal with a `0x` prefix (`0xFFFF`, `-0x10`).
  public init(argument: String) throws(ArgumentValueError) {
    var body = Substring(argument)
    var sign = ""
    if let first = body.first, first == "-" || first == "+" {
      sign = first == "-" ? "-" : ""
      body = body.dropFirst()
    }
    var radix = 10
    if body.hasPrefix("0x") || body.hasPrefix("0X") {
      radix = 16
      body = body.dropFirst(2)
    }
    let digitsAreValid =
      !body.isEmpty && body.allSatisfy { $0.isASCII && ($0.hexDigitValue ?? radix) < radix }
    guard digitsAreValid else { throw Self.rangeError(malformed: true) }
    guard let value = Self(sign + body, radix: radix) else {
      throw Self.rangeError(malformed: false)
    }
    self = value
  }

  private static func rangeError(malformed: Bool) -> ArgumentValueError {
    let noun = Self.isSigned ? "an integer" : "a non-negative integer"
    // The 64-bit bounds are too long to be useful in a message.
    if bitWidth >= 64 {
      return ArgumentValueError(malformed ? "expected \(noun)" : "\(noun) out of range")
    }
    return ArgumentValueError("expected \(noun) from \(Self.min) to \(Self.max)")
  }
}

extension Int: ExpressibleByArgument {}
extension Int8: ExpressibleByArgument {}
extension Int16: ExpressibleByArgument {}
extension Int32: ExpressibleByArgument {}
extension Int64: ExpressibleByArgument {}
extension UInt: ExpressibleByArgument {}
extension UInt8: ExpressibleByArgument {}
extension UInt16: ExpressibleByArgument {}
extension UInt32: ExpressibleByArgument {}
extension UInt64: ExpressibleByArgument {}

extension Double: ExpressibleByArgument {
  /// Accepts any finite decimal number (`1.5`, `-3`, `2e3`); refuses `nan` and `inf`.
  public init(argument: String) throws(ArgumentValueError) {
    guard let value = Double(argument), value.isFinite else {
      throw ArgumentValueError("expected a number")
    }
    self = value
  }
}

extension Duration: ExpressibleByArgument {
  /// Accepts a non-negative number with an optional unit: `ms`, `s` (the default), `m` or `h`,
  /// e.g. `10`, `1.5s`, `500ms`, `2m`.
  public init(argument: String) throws(ArgumentValueError) {
    let units: [(suffix: String, seconds: Double)] = [
      ("ms", 0.001), ("s", 1), ("min", 60), ("m", 60), ("h", 3600),
    ]
    var number = Substring(argument)
    var scale = 1.0
    for unit in units where number.hasSuffix(unit.suffix) {
      number = number.dropLast(unit.suffix.count)
      scale = unit.seconds
      break
    }
    let startsWithDigit = number.first.map { $0.isASCII && ($0.isNumber || $0 == ".") } ?? false
    guard startsWithDigit, let value = Double(number), value.isFinite,
      value * scale <= 1e9
    else {
      throw ArgumentValueError("expected a duration such as 10, 1.5s, 500ms or 2m")
    }
    self = .seconds(value * scale)
  }

  /// Whole seconds as `10s`, anything finer in milliseconds (`1500ms`).
  public var argumentDescription: String {
    let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    if milliseconds % 1000 != 0 { return "\(milliseconds)ms" }
    return "\(milliseconds / 1000)s"
  }
}
