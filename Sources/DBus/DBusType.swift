// A parsed D-Bus type signature: the tree the encoder checks values against and the decoder
// follows, so neither has to build signature strings per value.
import CDBus
import Synchronization

/// One parsed complete type. Immutable and shared.
final class DBusType: Sendable {
  enum Kind: Sendable {
    case basic
    case array(DBusType)
    case dictionary(key: DBusType, value: DBusType)
    case structure([DBusType])
    case variant
  }

  /// The libdbus type code (`DBUS_TYPE_*`): a basic code, `a` for arrays and dictionaries,
  /// `r` for structs, `v` for variants.
  let code: Int32
  let kind: Kind
  /// The complete signature of this type.
  let signature: Signature

  init(code: Int32, kind: Kind, signature: String) {
    self.code = code
    self.kind = kind
    self.signature = Signature(unchecked: signature)
  }

  /// Whether an array of this element type is a fixed array libdbus can read in one go.
  var isByte: Bool { code == TypeCode.byte }

  // MARK: Parsing

  private static let basicCodes: [UInt8] = Array("ybnqiuxtdsogh".utf8)

  /// The shared instances of the basic types and `v`, indexed by type code.
  static let simple: [DBusType?] = {
    var table = [DBusType?](repeating: nil, count: 128)
    for code in basicCodes {
      table[Int(code)] = DBusType(
        code: Int32(code), kind: .basic, signature: String(UnicodeScalar(code)))
    }
    table[Int(UInt8(ascii: "v"))] = DBusType(code: TypeCode.variant, kind: .variant, signature: "v")
    return table
  }()

  /// The shared type for a basic type code or `v`; nil for containers.
  @inline(__always)
  static func simple(_ code: Int32) -> DBusType? {
    guard code > 0 && code < 128 else { return nil }
    return simple[Int(code)]
  }

  /// `a<basic>` and `av` types, indexed by element code.
  static let arrays: [DBusType?] = {
    var table = [DBusType?](repeating: nil, count: 128)
    for element in simple.compactMap({ $0 }) {
      table[Int(element.code)] = DBusType(
        code: TypeCode.array, kind: .array(element), signature: "a" + element.signature.rawValue)
    }
    return table
  }()

  /// `a{kv}` types for basic keys and basic-or-variant values, indexed by key and value code.
  static let dictionaries: [[DBusType?]] = {
    var table = [[DBusType?]](repeating: [DBusType?](repeating: nil, count: 128), count: 128)
    for key in basicCodes {
      guard let keyType = simple[Int(key)] else { continue }
      for value in simple.compactMap({ $0 }) {
        table[Int(key)][Int(value.code)] = DBusType(
          code: TypeCode.array, kind: .dictionary(key: keyType, value: value),
          signature: "a{" + keyType.signature.rawValue + value.signature.rawValue + "}")
      }
    }
    return table
  }()

  private static let cache = Mutex<[String: [DBusType]]>([:])

  /// Parses a signature of any number of complete types. Validated by libdbus first;
  /// results are cached.
  static func parseList(_ signature: String) throws(DBusError) -> [DBusType] {
    if let hit = cache.withLock({ $0[signature] }) { return hit }
    guard Signature.isValid(signature) else {
      throw DBusError.invalid("invalid signature: \"\(signature)\"")
    }
    let bytes = Array(signature.utf8)
    var index = 0
    var types: [DBusType] = []
    while index < bytes.count {
      guard let type = parseOne(bytes, &index) else {
        throw DBusError.invalid("invalid signature: \"\(signature)\"")
      }
      types.append(type)
    }
    cache.withLock { cache in
      if cache.count > 4096 { cache.removeAll() }
      cache[signature] = types
    }
    return types
  }

  /// The type of a value: a basic value's (and `ay`'s, `v`'s) shared instance at once, a
  /// container's parsed from its signature.
  static func of(_ value: DBusValue) throws(DBusError) -> DBusType {
    let code: UInt8
    switch value {
    case .byte: code = UInt8(ascii: "y")
    case .bool: code = UInt8(ascii: "b")
    case .int16: code = UInt8(ascii: "n")
    case .uint16: code = UInt8(ascii: "q")
    case .int32: code = UInt8(ascii: "i")
    case .uint32: code = UInt8(ascii: "u")
    case .int64: code = UInt8(ascii: "x")
    case .uint64: code = UInt8(ascii: "t")
    case .double: code = UInt8(ascii: "d")
    case .string: code = UInt8(ascii: "s")
    case .objectPath: code = UInt8(ascii: "o")
    case .signature: code = UInt8(ascii: "g")
    case .unixFD: code = UInt8(ascii: "h")
    case .variant: code = UInt8(ascii: "v")
    case .bytes: return arrays[Int(UInt8(ascii: "y"))]!
    default: return try parseSingle(value.signature.rawValue)
    }
    return simple[Int(code)]!
  }

  /// Parses exactly one complete type.
  static func parseSingle(_ signature: String) throws(DBusError) -> DBusType {
    if signature.utf8.count == 1, let code = signature.utf8.first, let simple = simple(Int32(code))
    {
      return simple
    }
    let list = try parseList(signature)
    guard list.count == 1 else {
      throw DBusError.invalid("not a single complete type: \"\(signature)\"")
    }
    return list[0]
  }

  private static func parseOne(_ bytes: [UInt8], _ index: inout Int) -> DBusType? {
    guard index < bytes.count else { return nil }
    let start = index
    let code = bytes[index]
    index += 1
    func text() -> String { String(decoding: bytes[start..<index], as: UTF8.self) }
    switch code {
    case UInt8(ascii: "a"):
      if index < bytes.count && bytes[index] == UInt8(ascii: "{") {
        index += 1
        guard let key = parseOne(bytes, &index), let value = parseOne(bytes, &index),
          index < bytes.count, bytes[index] == UInt8(ascii: "}")
        else { return nil }
        index += 1
        return DBusType(
          code: TypeCode.array, kind: .dictionary(key: key, value: value), signature: text())
      }
      guard let element = parseOne(bytes, &index) else { return nil }
      return DBusType(code: TypeCode.array, kind: .array(element), signature: text())
    case UInt8(ascii: "("):
      var fields: [DBusType] = []
      while index < bytes.count && bytes[index] != UInt8(ascii: ")") {
        guard let field = parseOne(bytes, &index) else { return nil }
        fields.append(field)
      }
      guard index < bytes.count else { return nil }
      index += 1
      return DBusType(code: TypeCode.structure, kind: .structure(fields), signature: text())
    default:
      return simple(Int32(code))
    }
  }
}

/// libdbus type codes as Swift constants (the C macros are casts, which Swift does not import).
enum TypeCode {
  static let invalid: Int32 = 0
  static let byte = Int32(UInt8(ascii: "y"))
  static let bool = Int32(UInt8(ascii: "b"))
  static let int16 = Int32(UInt8(ascii: "n"))
  static let uint16 = Int32(UInt8(ascii: "q"))
  static let int32 = Int32(UInt8(ascii: "i"))
  static let uint32 = Int32(UInt8(ascii: "u"))
  static let int64 = Int32(UInt8(ascii: "x"))
  static let uint64 = Int32(UInt8(ascii: "t"))
  static let double = Int32(UInt8(ascii: "d"))
  static let string = Int32(UInt8(ascii: "s"))
  static let objectPath = Int32(UInt8(ascii: "o"))
  static let signature = Int32(UInt8(ascii: "g"))
  static let unixFD = Int32(UInt8(ascii: "h"))
  static let array = Int32(UInt8(ascii: "a"))
  static let variant = Int32(UInt8(ascii: "v"))
  static let structure = Int32(UInt8(ascii: "r"))
  static let dictEntry = Int32(UInt8(ascii: "e"))
}
