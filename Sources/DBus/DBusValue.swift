// DBusValue: one D-Bus value of any type, as a Swift enum, with typed accessors.

/// A D-Bus value of any type.
///
/// `ay` always decodes as `.bytes`; other arrays as `.array`, arrays of dict entries as
/// `.dictionary` (order preserved). Containers carry their element signatures so that empty
/// containers keep their type.
public enum DBusValue: Hashable, Sendable {
  case byte(UInt8)
  case bool(Bool)
  case int16(Int16)
  case uint16(UInt16)
  case int32(Int32)
  case uint32(UInt32)
  case int64(Int64)
  case uint64(UInt64)
  case double(Double)
  case string(String)
  case objectPath(ObjectPath)
  case signature(Signature)
  case unixFD(FileDescriptor)
  /// An array of bytes, `ay`.
  case bytes([UInt8])
  /// An array of any element type other than bytes or dict entries.
  case array(element: Signature, [DBusValue])
  /// An array of dict entries, `a{kv}`, in wire order.
  case dictionary(key: Signature, value: Signature, [DBusDictEntry])
  /// A struct, `(...)`.
  case structure([DBusValue])
  /// A variant, `v`.
  indirect case variant(DBusValue)

  /// The D-Bus signature of this value (one complete type).
  public var signature: Signature {
    var text = ""
    appendSignature(to: &text)
    return Signature(unchecked: text)
  }

  func appendSignature(to text: inout String) {
    switch self {
    case .byte: text += "y"
    case .bool: text += "b"
    case .int16: text += "n"
    case .uint16: text += "q"
    case .int32: text += "i"
    case .uint32: text += "u"
    case .int64: text += "x"
    case .uint64: text += "t"
    case .double: text += "d"
    case .string: text += "s"
    case .objectPath: text += "o"
    case .signature: text += "g"
    case .unixFD: text += "h"
    case .bytes: text += "ay"
    case .array(let element, _): text += "a" + element.rawValue
    case .dictionary(let key, let value, _): text += "a{" + key.rawValue + value.rawValue + "}"
    case .structure(let fields):
      text += "("
      for field in fields { field.appendSignature(to: &text) }
      text += ")"
    case .variant: text += "v"
    }
  }
}

/// One entry of a D-Bus dictionary (`{kv}`).
public struct DBusDictEntry: Hashable, Sendable {
  public var key: DBusValue
  public var value: DBusValue
  public init(key: DBusValue, value: DBusValue) {
    self.key = key
    self.value = value
  }
}

// MARK: - Accessors (variants are looked through; nil on a type mismatch)

extension DBusValue {
  /// This value with any variant wrappers removed.
  public var unwrapped: DBusValue {
    var value = self
    while case .variant(let inner) = value { value = inner }
    return value
  }

  public var stringValue: String? {
    if case .string(let v) = unwrapped { return v }
    return nil
  }
  public var boolValue: Bool? {
    if case .bool(let v) = unwrapped { return v }
    return nil
  }
  public var uint8Value: UInt8? {
    if case .byte(let v) = unwrapped { return v }
    return nil
  }
  public var int16Value: Int16? {
    if case .int16(let v) = unwrapped { return v }
    return nil
  }
  public var uint16Value: UInt16? {
    if case .uint16(let v) = unwrapped { return v }
    return nil
  }
  public var int32Value: Int32? {
    if case .int32(let v) = unwrapped { return v }
    return nil
  }
  public var uint32Value: UInt32? {
    if case .uint32(let v) = unwrapped { return v }
    return nil
  }
  public var int64Value: Int64? {
    if case .int64(let v) = unwrapped { return v }
    return nil
  }
  public var uint64Value: UInt64? {
    if case .uint64(let v) = unwrapped { return v }
    return nil
  }
  public var doubleValue: Double? {
    if case .double(let v) = unwrapped { return v }
    return nil
  }
  /// The bytes of an `ay` (also accepted: an `.array` whose elements are all bytes).
  public var bytesValue: [UInt8]? {
    switch unwrapped {
    case .bytes(let v): return v
    case .array(let element, let items) where element.rawValue == "y":
      var out: [UInt8] = []
      out.reserveCapacity(items.count)
      for item in items {
        guard case .byte(let b) = item else { return nil }
        out.append(b)
      }
      return out
    default: return nil
    }
  }
  public var objectPathValue: ObjectPath? {
    if case .objectPath(let v) = unwrapped { return v }
    return nil
  }
  public var signatureValue: Signature? {
    if case .signature(let v) = unwrapped { return v }
    return nil
  }
  public var fileDescriptorValue: FileDescriptor? {
    if case .unixFD(let v) = unwrapped { return v }
    return nil
  }
  /// The elements of any array (`ay` yields `.byte` elements).
  public var arrayValue: [DBusValue]? {
    switch unwrapped {
    case .array(_, let items): return items
    case .bytes(let bytes): return bytes.map { .byte($0) }
    default: return nil
    }
  }
  /// The strings of an `as` (nil if any element is not a string).
  public var stringArrayValue: [String]? {
    guard case .array(_, let items) = unwrapped else { return nil }
    var out: [String] = []
    out.reserveCapacity(items.count)
    for item in items {
      guard case .string(let s) = item else { return nil }
      out.append(s)
    }
    return out
  }
  /// The object paths of an `ao` (nil if any element is not an object path).
  public var objectPathArrayValue: [ObjectPath]? {
    guard case .array(_, let items) = unwrapped else { return nil }
    var out: [ObjectPath] = []
    out.reserveCapacity(items.count)
    for item in items {
      guard case .objectPath(let p) = item else { return nil }
      out.append(p)
    }
    return out
  }
  public var dictionaryValue: [DBusDictEntry]? {
    if case .dictionary(_, _, let entries) = unwrapped { return entries }
    return nil
  }
  public var structureValue: [DBusValue]? {
    if case .structure(let fields) = unwrapped { return fields }
    return nil
  }

  /// An `a{sv}` from a Swift dictionary: values wrapped in variants, entries sorted by key.
  public static func dictionaryOfVariants(_ dictionary: [String: DBusValue]) -> DBusValue {
    let entries = dictionary.sorted { $0.key < $1.key }.map {
      DBusDictEntry(key: .string($0.key), value: .variant($0.value))
    }
    return .dictionary(key: "s", value: "v", entries)
  }

  /// An `a{sv}` (or any string-keyed dictionary) as a Swift dictionary, variants unwrapped.
  /// nil if this is not a dictionary keyed by strings.
  public var stringVariantDictionary: [String: DBusValue]? {
    guard case .dictionary(_, _, let entries) = unwrapped else { return nil }
    // (Not `reserveCapacity`: that call is not specialized here and costs more than the rest.)
    var out = [String: DBusValue](minimumCapacity: entries.count)
    for entry in entries {
      guard case .string(let key) = entry.key else { return nil }
      out[key] = entry.value.unwrapped
    }
    return out
  }
}

// MARK: - Literals

extension DBusValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
  public init(stringLiteral value: String) { self = .string(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension DBusValue {
  /// An `as` from Swift strings.
  public static func strings(_ values: [String]) -> DBusValue {
    .array(element: "s", values.map { .string($0) })
  }
  /// An `ao` from object paths.
  public static func objectPaths(_ values: [ObjectPath]) -> DBusValue {
    .array(element: "o", values.map { .objectPath($0) })
  }
}
