// Appending DBusValues to a libdbus message, checking each value against its expected type
// first so that libdbus never sees a mismatch (its own checks abort the process).
import CDBus

enum MessageEncoder {
  /// libdbus allows 32 levels of arrays plus 32 of structs; variants count too. Stay under.
  static let maximumDepth = 63

  static func encode(
    _ value: DBusValue, as type: DBusType, into iter: inout DBusMessageIter, depth: Int
  ) throws(DBusError) {
    guard depth < maximumDepth else { throw DBusError.invalid("value is nested too deeply") }
    switch (value, type.code) {
    case (.byte(let v), TypeCode.byte): try appendFixed(v, type.code, &iter)
    case (.bool(let v), TypeCode.bool): try appendFixed(dbus_bool_t(v ? 1 : 0), type.code, &iter)
    case (.int16(let v), TypeCode.int16): try appendFixed(v, type.code, &iter)
    case (.uint16(let v), TypeCode.uint16): try appendFixed(v, type.code, &iter)
    case (.int32(let v), TypeCode.int32): try appendFixed(v, type.code, &iter)
    case (.uint32(let v), TypeCode.uint32): try appendFixed(v, type.code, &iter)
    case (.int64(let v), TypeCode.int64): try appendFixed(v, type.code, &iter)
    case (.uint64(let v), TypeCode.uint64): try appendFixed(v, type.code, &iter)
    case (.double(let v), TypeCode.double): try appendFixed(v, type.code, &iter)
    case (.string(let v), TypeCode.string):
      guard !v.utf8.contains(0) else { throw DBusError.invalid("string contains a NUL byte") }
      try appendString(v, type.code, &iter)
    case (.objectPath(let v), TypeCode.objectPath): try appendString(v.rawValue, type.code, &iter)
    case (.signature(let v), TypeCode.signature): try appendString(v.rawValue, type.code, &iter)
    case (.unixFD(let fd), TypeCode.unixFD):
      let raw = fd.rawValue
      guard raw >= 0 else { throw DBusError.invalid("file descriptor was already taken") }
      try appendFixed(raw, type.code, &iter)  // libdbus dups the descriptor
    case (.bytes(let bytes), TypeCode.array):
      guard case .array(let element) = type.kind, element.isByte else {
        throw mismatch(value, type)
      }
      try appendBytes(bytes, &iter)
    case (.array(let elementSignature, let items), TypeCode.array):
      guard case .array(let element) = type.kind, element.signature == elementSignature else {
        throw mismatch(value, type)
      }
      var sub = DBusMessageIter()
      try open(&iter, TypeCode.array, element.signature.rawValue, &sub)
      do throws(DBusError) {
        for item in items { try encode(item, as: element, into: &sub, depth: depth + 1) }
      } catch {
        dbus_message_iter_abandon_container(&iter, &sub)
        throw error
      }
      try close(&iter, &sub)
    case (.dictionary(let keySignature, let valueSignature, let entries), TypeCode.array):
      guard case .dictionary(let key, let valueType) = type.kind, key.signature == keySignature,
        valueType.signature == valueSignature
      else { throw mismatch(value, type) }
      var sub = DBusMessageIter()
      let entrySignature = "{" + keySignature.rawValue + valueSignature.rawValue + "}"
      try open(&iter, TypeCode.array, entrySignature, &sub)
      do throws(DBusError) {
        for entry in entries {
          var pair = DBusMessageIter()
          try open(&sub, TypeCode.dictEntry, nil, &pair)
          do throws(DBusError) {
            try encode(entry.key, as: key, into: &pair, depth: depth + 2)
            try encode(entry.value, as: valueType, into: &pair, depth: depth + 2)
          } catch {
            dbus_message_iter_abandon_container(&sub, &pair)
            throw error
          }
          try close(&sub, &pair)
        }
      } catch {
        dbus_message_iter_abandon_container(&iter, &sub)
        throw error
      }
      try close(&iter, &sub)
    case (.structure(let fields), TypeCode.structure):
      guard case .structure(let fieldTypes) = type.kind, fieldTypes.count == fields.count,
        !fields.isEmpty
      else { throw mismatch(value, type) }
      var sub = DBusMessageIter()
      try open(&iter, TypeCode.structure, nil, &sub)
      do throws(DBusError) {
        for (field, fieldType) in zip(fields, fieldTypes) {
          try encode(field, as: fieldType, into: &sub, depth: depth + 1)
        }
      } catch {
        dbus_message_iter_abandon_container(&iter, &sub)
        throw error
      }
      try close(&iter, &sub)
    case (.variant(let inner), TypeCode.variant):
      let innerType = try DBusType.of(inner)
      var sub = DBusMessageIter()
      try open(&iter, TypeCode.variant, innerType.signature.rawValue, &sub)
      do throws(DBusError) {
        try encode(inner, as: innerType, into: &sub, depth: depth + 1)
      } catch {
        dbus_message_iter_abandon_container(&iter, &sub)
        throw error
      }
      try close(&iter, &sub)
    default:
      throw mismatch(value, type)
    }
  }

  private static func mismatch(_ value: DBusValue, _ type: DBusType) -> DBusError {
    DBusError.invalid(
      "value of type \"\(value.signature)\" given where \"\(type.signature)\" is expected")
  }

  @inline(__always)
  private static func appendFixed<T: BitwiseCopyable>(
    _ value: T, _ code: Int32, _ iter: inout DBusMessageIter
  )
    throws(DBusError)
  {
    var copy = value
    guard dbus_message_iter_append_basic(&iter, code, &copy) != 0 else {
      throw DBusError.noMemoryError
    }
  }

  @inline(__always)
  private static func appendString(_ value: String, _ code: Int32, _ iter: inout DBusMessageIter)
    throws(DBusError)
  {
    let ok = value.withCString { blekit_iter_append_string(&iter, code, $0) }
    guard ok != 0 else { throw DBusError.noMemoryError }
  }

  private static func appendBytes(_ bytes: [UInt8], _ iter: inout DBusMessageIter)
    throws(DBusError)
  {
    var sub = DBusMessageIter()
    try open(&iter, TypeCode.array, "y", &sub)
    let ok = bytes.withUnsafeBufferPointer {
      blekit_iter_append_fixed_array(&sub, TypeCode.byte, $0.baseAddress, Int32($0.count))
    }
    guard ok != 0 else {
      dbus_message_iter_abandon_container(&iter, &sub)
      throw DBusError.noMemoryError
    }
    try close(&iter, &sub)
  }

  @inline(__always)
  private static func open(
    _ iter: inout DBusMessageIter, _ code: Int32, _ signature: String?,
    _ sub: inout DBusMessageIter
  ) throws(DBusError) {
    let ok: dbus_bool_t
    if let signature {
      ok = signature.withCString { dbus_message_iter_open_container(&iter, code, $0, &sub) }
    } else {
      ok = dbus_message_iter_open_container(&iter, code, nil, &sub)
    }
    guard ok != 0 else { throw DBusError.noMemoryError }
  }

  @inline(__always)
  private static func close(_ iter: inout DBusMessageIter, _ sub: inout DBusMessageIter)
    throws(DBusError)
  {
    guard dbus_message_iter_close_container(&iter, &sub) != 0 else {
      throw DBusError.noMemoryError
    }
  }
}
