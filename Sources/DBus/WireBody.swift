// WireBody: a message's body read straight from its bytes (the D-Bus wire format), for
// MessageReader and every decode of a body. libdbus validated a received message when it
// arrived; this reads a copy of it.
import CDBus

#if canImport(Glibc)
  import Glibc
#endif

/// The marshalled bytes of one received message (libdbus's `dbus_message_marshal`) and a
/// cursor over its body.
///
/// Why not libdbus's iterators: each value read through them is several calls into libdbus's
/// type reader (which dispatches through tables of functions). Measured with callgrind
/// (`scripts/bench-decoders`), reading whole bodies into ``DBusValue``s took 42.6 M
/// instructions here against 78.6 M through the iterators for a 1,000-device
/// GetManagedObjects reply, 55 k against 93 k for one InterfacesAdded, 28 k against 35 k for a
/// PropertiesChanged. The message was validated by libdbus on arrival
/// (`_dbus_message_loader_queue_messages` checks the whole body against its signature); every
/// read here is still bounds-checked and throws on anything inconsistent.
///
/// Unix file descriptors (`h`) travel beside the bytes, which hold only their index: when the
/// message carries any, libdbus hands out duplicates of them, in the order the body holds them,
/// and reading an `h` gives the next one (a duplicate again, so the body can be read twice).
struct WireBody: ~Copyable {
  private let base: UnsafeMutablePointer<CChar>
  private let end: Int
  private let bigEndian: Bool
  /// Where the body starts, from the start of the message.
  private let start: Int
  /// The read position, from the start of the message (D-Bus aligns relative to it).
  private(set) var offset: Int
  /// How many containers (arrays, structs, variants; a dictionary counts once, with its
  /// entries) enclose the value being read: bounded by ``maximumDepth`` whatever the bytes say,
  /// so a hostile message cannot exhaust the stack.
  private var depth = 0
  /// The most containers a value may be inside: the D-Bus specification's limit on containers
  /// (variants included), 64. libdbus validates received messages to it too (a byte inside 64
  /// variants passes); this holds whatever the bytes' origin.
  var maximumDepth = 64
  /// The message's unix file descriptors in body order (owned; closed with the body).
  private let descriptors: [Int32]
  /// How many `h` values have been read since the start (or the rewind).
  private var descriptorsRead = 0

  /// The body of `message`; throws when libdbus cannot marshal it (out of memory).
  init(_ message: OpaquePointer) throws(DBusError) {
    var pointer: UnsafeMutablePointer<CChar>?
    var length: Int32 = 0
    guard dbus_message_marshal(message, &pointer, &length) != 0, let pointer else {
      throw DBusError.noMemoryError
    }
    let count = Int(length)
    let raw = UnsafeRawPointer(pointer)
    // Fixed header: endianness, type, flags, version, body length, serial, then the header
    // fields' array length; the body starts at the next multiple of 8 after the fields.
    guard count >= 16 else {
      dbus_free(pointer)
      throw Self.malformed
    }
    let big = raw.load(as: UInt8.self) == UInt8(ascii: "B")
    func u32(_ at: Int) -> Int {
      let value = raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)
      return Int(big ? UInt32(bigEndian: value) : UInt32(littleEndian: value))
    }
    let bodyLength = u32(4)
    let start = (16 + u32(12) + 7) & ~7
    guard start <= count, bodyLength <= count - start else {
      dbus_free(pointer)
      throw Self.malformed
    }
    base = pointer
    descriptors = dbus_message_contains_unix_fds(message) != 0 ? Self.descriptors(of: message) : []
    bigEndian = big
    self.start = start
    offset = start
    end = start + bodyLength
  }

  deinit {
    dbus_free(base)
    for fd in descriptors where fd >= 0 { Syscall.close(fd) }
  }

  /// Duplicates of the unix fds in `message`, in the order its body holds them (libdbus keeps
  /// the descriptors themselves; only its iterators hand them out).
  private static func descriptors(of message: OpaquePointer) -> [Int32] {
    func collect(_ iter: inout DBusMessageIter, into fds: inout [Int32]) {
      repeat {
        switch dbus_message_iter_get_arg_type(&iter) {
        case TypeCode.invalid: return
        case TypeCode.unixFD:
          fds.append(Int32(truncatingIfNeeded: blekit_iter_get_fixed_bits(&iter)))
        case TypeCode.array where dbus_message_iter_get_element_type(&iter) == TypeCode.byte:
          break
        case TypeCode.array, TypeCode.structure, TypeCode.variant, TypeCode.dictEntry:
          var sub = DBusMessageIter()
          dbus_message_iter_recurse(&iter, &sub)
          collect(&sub, into: &fds)
        default: break
        }
      } while dbus_message_iter_next(&iter) != 0
    }
    var fds: [Int32] = []
    var iter = DBusMessageIter()
    if dbus_message_iter_init(message, &iter) != 0 { collect(&iter, into: &fds) }
    return fds
  }

  /// Whether the body has been read to its end.
  var isAtEnd: Bool { offset >= end }

  /// Moves the cursor back to the start of the body.
  mutating func rewind() {
    offset = start
    descriptorsRead = 0
  }

  /// Moves the cursor to `position` (an array's end, from ``arrayStart(elementAlignment:)``),
  /// skipping what lies before it unread.
  /// Refused in a body with unix fds: an `h` skipped would shift the ones read after it.
  mutating func skip(to position: Int) throws(DBusError) {
    guard position >= offset, position <= end, descriptors.isEmpty else { throw Self.malformed }
    offset = position
  }

  /// Reads a string (`s` or `o`) and tells whether it is `expected`, without making a
  /// `String` of it.
  mutating func stringEquals(_ expected: inout String) throws(DBusError) -> Bool {
    let bytes = try terminatedBytes(length: Int(try fixed(UInt32.self)))
    return expected.withUTF8 { wanted in
      wanted.count == bytes.count
        && (bytes.isEmpty || memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0)
    }
  }

  // MARK: Values

  /// Reads one value of `type`.
  /// - Throws: ``malformed`` also for containers nested deeper than ``maximumDepth``.
  mutating func value(_ type: DBusType) throws(DBusError) -> DBusValue {
    // Only containers count: a basic value adds no nesting (counting it too refused a byte
    // inside 64 variants, which libdbus and the whole-body decoder accept).
    let isContainer: Bool
    if case .basic = type.kind { isContainer = false } else { isContainer = true }
    if isContainer {
      depth += 1
      guard depth <= maximumDepth else {
        depth -= 1
        throw Self.malformed
      }
    }
    defer { if isContainer { depth -= 1 } }
    switch type.code {
    case TypeCode.byte: return .byte(try fixed(UInt8.self))
    case TypeCode.bool: return .bool(try fixed(UInt32.self) != 0)
    case TypeCode.int16: return .int16(Int16(bitPattern: try fixed(UInt16.self)))
    case TypeCode.uint16: return .uint16(try fixed(UInt16.self))
    case TypeCode.int32: return .int32(Int32(bitPattern: try fixed(UInt32.self)))
    case TypeCode.uint32: return .uint32(try fixed(UInt32.self))
    case TypeCode.int64: return .int64(Int64(bitPattern: try fixed(UInt64.self)))
    case TypeCode.uint64: return .uint64(try fixed(UInt64.self))
    case TypeCode.double: return .double(Double(bitPattern: try fixed(UInt64.self)))
    case TypeCode.string: return .string(try string())
    case TypeCode.objectPath: return .objectPath(ObjectPath(unchecked: try string()))
    case TypeCode.signature: return .signature(Signature(unchecked: try signature()))
    case TypeCode.variant: return .variant(try variantContent())
    case TypeCode.structure:
      guard case .structure(let fieldTypes) = type.kind else { throw Self.malformed }
      try align(8)
      var fields: [DBusValue] = []
      fields.reserveCapacity(fieldTypes.count)
      for fieldType in fieldTypes { fields.append(try value(fieldType)) }
      return .structure(fields)
    case TypeCode.array:
      switch type.kind {
      case .array(let element):
        let arrayEnd = try arrayStart(elementAlignment: Self.alignment(of: element.code))
        if element.isByte {
          let bytes = Array(
            UnsafeRawBufferPointer(start: UnsafeRawPointer(base) + offset, count: arrayEnd - offset)
          )
          offset = arrayEnd
          return .bytes(bytes)
        }
        var items: [DBusValue] = []
        items.reserveCapacity(8)
        while offset < arrayEnd { items.append(try value(element)) }
        guard offset == arrayEnd else { throw Self.malformed }
        return .array(element: element.signature, items)
      case .dictionary(let key, let valueType):
        let arrayEnd = try arrayStart(elementAlignment: 8)
        var entries: [DBusDictEntry] = []
        entries.reserveCapacity(8)
        while offset < arrayEnd {
          try align(8)
          let k = try value(key)
          entries.append(DBusDictEntry(key: k, value: try value(valueType)))
        }
        guard offset == arrayEnd else { throw Self.malformed }
        return .dictionary(key: key.signature, value: valueType.signature, entries)
      default:
        throw Self.malformed
      }
    case TypeCode.unixFD:
      _ = try fixed(UInt32.self)  // the index; the descriptors come in body order
      guard descriptorsRead < descriptors.count, descriptors[descriptorsRead] >= 0 else {
        throw DBusError(code: .unexpectedReply, message: "message carried an invalid fd")
      }
      let fd = Syscall.dup(descriptors[descriptorsRead])
      descriptorsRead += 1
      guard fd >= 0 else {
        throw DBusError(code: .unexpectedReply, message: "cannot duplicate a received fd")
      }
      return .unixFD(FileDescriptor(owning: fd))
    default:
      throw DBusError(
        code: .unexpectedReply, message: "type \(type.signature) cannot be read from the bytes")
    }
  }

  /// A variant's signature and value, the value unwrapped from the variant.
  mutating func variantContent() throws(DBusError) -> DBusValue {
    // The common shapes (`s`, `as`, `a{qv}`...) are looked up from the signature's bytes in the
    // shared tables; only others are made into a string and parsed.
    let signature = try terminatedBytes(length: Int(try fixed(UInt8.self)))
    let type: DBusType
    if let common = Self.commonType(signature) {
      type = common
    } else {
      type = try DBusType.parseSingle(String(decoding: signature, as: UTF8.self))
    }
    return try value(type)
  }

  /// A string (`s` or `o`): a 32-bit length, the bytes, NUL.
  mutating func string() throws(DBusError) -> String {
    String(decoding: try terminatedBytes(length: Int(try fixed(UInt32.self))), as: UTF8.self)
  }

  /// A signature (`g`): one length byte, the bytes, NUL.
  mutating func signature() throws(DBusError) -> String {
    String(decoding: try terminatedBytes(length: Int(try fixed(UInt8.self))), as: UTF8.self)
  }

  /// The `length` bytes at the cursor, which moves past them and the NUL that follows. The
  /// bytes are valid until the body is freed.
  private mutating func terminatedBytes(length: Int) throws(DBusError) -> UnsafeRawBufferPointer {
    guard length < end - offset else { throw Self.malformed }
    let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(base) + offset, count: length)
    offset += length + 1
    return bytes
  }

  /// Reads an array's length and moves to its first element; returns where the array ends.
  mutating func arrayStart(elementAlignment: Int) throws(DBusError) -> Int {
    let length = Int(try fixed(UInt32.self))
    try align(elementAlignment)
    guard length <= end - offset else { throw Self.malformed }
    return offset + length
  }

  /// Moves to the next multiple of `alignment` (1, 2, 4 or 8).
  mutating func align(_ alignment: Int) throws(DBusError) {
    let aligned = (offset + alignment - 1) & ~(alignment - 1)
    guard aligned <= end else { throw Self.malformed }
    offset = aligned
  }

  /// A fixed-size integer, aligned to its size, in the message's byte order.
  @inline(__always)
  mutating func fixed<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) throws(DBusError) -> T {
    let size = MemoryLayout<T>.size
    try align(size)
    guard size <= end - offset else { throw Self.malformed }
    let raw = UnsafeRawPointer(base).loadUnaligned(fromByteOffset: offset, as: T.self)
    offset += size
    return bigEndian ? T(bigEndian: raw) : T(littleEndian: raw)
  }

  // MARK: Types

  /// The wire alignment of a type code.
  static func alignment(of code: Int32) -> Int {
    switch code {
    case TypeCode.byte, TypeCode.signature, TypeCode.variant: 1
    case TypeCode.int16, TypeCode.uint16: 2
    case TypeCode.int64, TypeCode.uint64, TypeCode.double, TypeCode.structure,
      TypeCode.dictEntry:
      8
    default: 4  // b, i, u, s, o, h, a
    }
  }

  /// The shared type for a signature of the form `x`, `ax` or `a{xy}` (`x` basic or `v`, `y`
  /// basic or `v`), or `nil` for any other.
  static func commonType(_ signature: UnsafeRawBufferPointer) -> DBusType? {
    func code(_ index: Int) -> Int? {
      let byte = signature[index]
      return byte < 128 ? Int(byte) : nil
    }
    switch signature.count {
    case 1:
      return code(0).flatMap { DBusType.simple[$0] }
    case 2 where signature[0] == UInt8(ascii: "a"):
      return code(1).flatMap { DBusType.arrays[$0] }
    case 5
    where signature[0] == UInt8(ascii: "a") && signature[1] == UInt8(ascii: "{")
      && signature[4] == UInt8(ascii: "}"):
      guard let key = code(2), let value = code(3) else { return nil }
      return DBusType.dictionaries[key][value]
    default:
      return nil
    }
  }

  static let malformed = DBusError(
    code: .unexpectedReply, message: "message body does not match its signature")
}
