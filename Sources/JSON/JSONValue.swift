// JSONValue: the one JSON value of blekit's command-line tool, its fleet and `serve`
// profiles; objects keep their key order (the order a payload or a profile was written in).

/// A JSON value. Objects keep their members in order; an integer that fits `Int` is `.int`,
/// any other number `.number` (the parser never makes a non-finite one).
public indirect enum JSONValue: Sendable, Hashable {
  case string(String)
  case number(Double)
  case int(Int)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([Field])

  /// One member of an object.
  public struct Field: Sendable, Hashable {
    public var key: String
    public var value: JSONValue
    public init(_ key: String, _ value: JSONValue) {
      self.key = key
      self.value = value
    }
  }

  /// The member named `key` of an object (the parser refuses a key given twice).
  public subscript(key: String) -> JSONValue? {
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

  /// The value as an integer, if it is a whole number below 1e15 in magnitude.
  public var intValue: Int? {
    switch self {
    case .int(let value): value
    case .number(let value) where value == value.rounded() && abs(value) < 1e15: Int(value)
    default: nil
    }
  }
}
