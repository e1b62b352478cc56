// Reading a libdbus message body into DBusValues, guided by the parsed body signature so no
// signature strings are built per value (only a variant holding a container needs a lookup).
import CDBus

enum MessageDecoder {
  /// Decodes every argument of `message`.
  static func decodeBody(of message: OpaquePointer) throws(DBusError) -> [DBusValue] {
    guard let cSignature = dbus_message_get_signature(message), cSignature.pointee != 0 else {
      return []
    }
    let types = try DBusType.parseList(String(cString: cSignature))
    var iter = DBusMessageIter()
    guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
    var values: [DBusValue] = []
    values.reserveCapacity(types.count)
    for (index, type) in types.enumerated() {
      values.append(try decode(&iter, type))
      if index + 1 < types.count { dbus_message_iter_next(&iter) }
    }
    return values
  }

  /// Decodes the value under `iter`, which must be of `type`.
  static func decode(_ iter: inout DBusMessageIter, _ type: DBusType) throws(DBusError)
    -> DBusValue
  {
    let code = dbus_message_iter_get_arg_type(&iter)
    guard code == type.code else {
      throw DBusError(
        code: .unexpectedReply,
        message: "message body does not match its signature \"\(type.signature)\"")
    }
    switch code {
    case TypeCode.byte: return .byte(UInt8(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.bool:
      return .bool(UInt32(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)) != 0)
    case TypeCode.int16: return .int16(Int16(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.uint16:
      return .uint16(UInt16(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.int32: return .int32(Int32(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.uint32:
      return .uint32(UInt32(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.int64: return .int64(Int64(bitPattern: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.uint64: return .uint64(blekit_iter_get_fixed_bits(&iter))
    case TypeCode.double: return .double(Double(bitPattern: blekit_iter_get_fixed_bits(&iter)))
    case TypeCode.string: return .string(readString(&iter))
    case TypeCode.objectPath: return .objectPath(ObjectPath(unchecked: readString(&iter)))
    case TypeCode.signature: return .signature(Signature(unchecked: readString(&iter)))
    case TypeCode.unixFD:
      // libdbus hands out a duplicate that the reader owns.
      let fd = Int32(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter))
      guard fd >= 0 else {
        throw DBusError(code: .unexpectedReply, message: "message carried an invalid fd")
      }
      return .unixFD(FileDescriptor(owning: fd))
    case TypeCode.array:
      var sub = DBusMessageIter()
      dbus_message_iter_recurse(&iter, &sub)
      switch type.kind {
      case .array(let element):
        if element.isByte {
          var pointer: UnsafeRawPointer?
          let count = Int(blekit_iter_get_fixed_array(&sub, &pointer))
          guard count > 0, let pointer else { return .bytes([]) }
          return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: count)))
        }
        var items: [DBusValue] = []
        items.reserveCapacity(8)
        while dbus_message_iter_get_arg_type(&sub) != TypeCode.invalid {
          items.append(try decode(&sub, element))
          dbus_message_iter_next(&sub)
        }
        return .array(element: element.signature, items)
      case .dictionary(let key, let value):
        var entries: [DBusDictEntry] = []
        entries.reserveCapacity(8)
        while dbus_message_iter_get_arg_type(&sub) == TypeCode.dictEntry {
          var pair = DBusMessageIter()
          dbus_message_iter_recurse(&sub, &pair)
          let k = try decode(&pair, key)
          dbus_message_iter_next(&pair)
          let v = try decode(&pair, value)
          entries.append(DBusDictEntry(key: k, value: v))
          dbus_message_iter_next(&sub)
        }
        return .dictionary(key: key.signature, value: value.signature, entries)
      default:
        throw DBusError(code: .unexpectedReply, message: "array where none was expected")
      }
    case TypeCode.structure:
      guard case .structure(let fieldTypes) = type.kind else {
        throw DBusError(code: .unexpectedReply, message: "struct where none was expected")
      }
      var sub = DBusMessageIter()
      dbus_message_iter_recurse(&iter, &sub)
      var fields: [DBusValue] = []
      fields.reserveCapacity(fieldTypes.count)
      for (index, fieldType) in fieldTypes.enumerated() {
        fields.append(try decode(&sub, fieldType))
        if index + 1 < fieldTypes.count { dbus_message_iter_next(&sub) }
      }
      return .structure(fields)
    case TypeCode.variant:
      var sub = DBusMessageIter()
      dbus_message_iter_recurse(&iter, &sub)
      return .variant(try decodeCurrent(&sub))
    default:
      throw DBusError(
        code: .unexpectedReply, message: "unknown type code \(code) in message body")
    }
  }

  /// Decodes the value under `iter` whatever its type (a variant's content, say), finding the
  /// type without a signature string for the common shapes.
  static func decodeCurrent(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
    let code = dbus_message_iter_get_arg_type(&iter)
    let type: DBusType
    if let simple = DBusType.simple(code) {
      type = simple
    } else if let common = commonContainerType(&iter, code) {
      type = common
    } else {
      guard let cSignature = dbus_message_iter_get_signature(&iter) else {
        throw DBusError.noMemoryError
      }
      defer { dbus_free(cSignature) }
      type = try DBusType.parseSingle(String(cString: cSignature))
    }
    return try decode(&iter, type)
  }

  /// The type of a variant's array content without asking libdbus for a signature string, for
  /// the common shapes `a<basic>`, `av` and (non-empty) `a{<basic><basic or v>}`.
  @inline(__always)
  private static func commonContainerType(_ iter: inout DBusMessageIter, _ code: Int32)
    -> DBusType?
  {
    guard code == TypeCode.array else { return nil }
    let element = dbus_message_iter_get_element_type(&iter)
    if element != TypeCode.dictEntry {
      guard element > 0 && element < 128 else { return nil }
      return DBusType.arrays[Int(element)]
    }
    var entries = DBusMessageIter()
    dbus_message_iter_recurse(&iter, &entries)
    guard dbus_message_iter_get_arg_type(&entries) == TypeCode.dictEntry else { return nil }
    var pair = DBusMessageIter()
    dbus_message_iter_recurse(&entries, &pair)
    let key = dbus_message_iter_get_arg_type(&pair)
    guard dbus_message_iter_next(&pair) != 0 else { return nil }
    let value = dbus_message_iter_get_arg_type(&pair)
    guard key > 0 && key < 128 && value > 0 && value < 128 else { return nil }
    return DBusType.dictionaries[Int(key)][Int(value)]
  }

  @inline(__always)
  private static func readString(_ iter: inout DBusMessageIter) -> String {
    guard let pointer = blekit_iter_get_string(&iter) else { return "" }
    return String(cString: pointer)
  }
}
