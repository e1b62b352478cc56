// MessageReader: reading a received message's arguments one by one, into the shapes the caller
// asks for, without building a DBusValue for the whole body first.
import CDBus

/// Reads the arguments of a message in order, straight from libdbus's buffer.
///
/// ``DBusMessage/arguments()`` gives the whole body as ``DBusValue``s; a caller that knows the
/// signature it expects can instead read each argument as what it will keep: a property
/// dictionary (`a{sv}`) comes out as `[String: DBusValue]` with the variants unwrapped, without
/// the intermediate entries and variant boxes. Each read checks the argument's type and throws
/// ``DBusError/Code/unexpectedReply`` on a mismatch or when the arguments have run out; after a
/// failed read the reader's position is unspecified.
///
/// A reader is valid only while its message is: inside the handler given to
/// ``DBusConnection/handleSignals(_:reading:)``, or inside ``DBusMessage/read(_:)``.
public struct MessageReader {
  private var iter = DBusMessageIter()
  private var hasCurrent: Bool

  init(_ message: OpaquePointer) {
    hasCurrent = dbus_message_iter_init(message, &iter) != 0
  }

  /// Whether every argument has been read.
  public var isAtEnd: Bool {
    mutating get { !hasCurrent || dbus_message_iter_get_arg_type(&iter) == TypeCode.invalid }
  }

  /// Reads an argument of any type.
  public mutating func value() throws(DBusError) -> DBusValue {
    try expect(nil)
    defer { advance() }
    return try MessageDecoder.decodeCurrent(&iter)
  }

  /// Reads a string (`s`).
  public mutating func string() throws(DBusError) -> String {
    try expect(TypeCode.string)
    defer { advance() }
    return MessageDecoder.readString(&iter)
  }

  /// Reads an object path (`o`).
  public mutating func objectPath() throws(DBusError) -> ObjectPath {
    try expect(TypeCode.objectPath)
    defer { advance() }
    return ObjectPath(unchecked: MessageDecoder.readString(&iter))
  }

  /// Reads an array of strings (`as`).
  public mutating func strings() throws(DBusError) -> [String] {
    try expectArray(of: TypeCode.string)
    defer { advance() }
    var items = DBusMessageIter()
    dbus_message_iter_recurse(&iter, &items)
    var strings: [String] = []
    while dbus_message_iter_get_arg_type(&items) == TypeCode.string {
      strings.append(MessageDecoder.readString(&items))
      dbus_message_iter_next(&items)
    }
    return strings
  }

  /// Reads a property dictionary (`a{sv}`), each value unwrapped from its variant(s).
  public mutating func properties() throws(DBusError) -> [String: DBusValue] {
    try expectArray(of: TypeCode.dictEntry)
    defer { advance() }
    return try Self.properties(in: &iter)
  }

  /// Reads interfaces and their properties (`a{sa{sv}}`, as ObjectManager sends them), each
  /// property value unwrapped from its variant(s).
  public mutating func interfacesAndProperties() throws(DBusError)
    -> [String: [String: DBusValue]]
  {
    try expectArray(of: TypeCode.dictEntry)
    defer { advance() }
    var entries = DBusMessageIter()
    dbus_message_iter_recurse(&iter, &entries)
    var result: [String: [String: DBusValue]] = [:]
    while dbus_message_iter_get_arg_type(&entries) == TypeCode.dictEntry {
      var pair = DBusMessageIter()
      dbus_message_iter_recurse(&entries, &pair)
      guard dbus_message_iter_get_arg_type(&pair) == TypeCode.string else {
        throw Self.mismatch("a{sa{sv}}")
      }
      let name = MessageDecoder.readString(&pair)
      dbus_message_iter_next(&pair)
      guard dbus_message_iter_get_arg_type(&pair) == TypeCode.array,
        dbus_message_iter_get_element_type(&pair) == TypeCode.dictEntry
      else { throw Self.mismatch("a{sa{sv}}") }
      result[name] = try Self.properties(in: &pair)
      dbus_message_iter_next(&entries)
    }
    return result
  }

  // MARK: Helpers

  /// `a{sv}` under `iter` (an array of dict entries) into a dictionary.
  private static func properties(in iter: inout DBusMessageIter) throws(DBusError)
    -> [String: DBusValue]
  {
    var entries = DBusMessageIter()
    dbus_message_iter_recurse(&iter, &entries)
    var result: [String: DBusValue] = Dictionary(minimumCapacity: 16)
    while dbus_message_iter_get_arg_type(&entries) == TypeCode.dictEntry {
      var pair = DBusMessageIter()
      dbus_message_iter_recurse(&entries, &pair)
      guard dbus_message_iter_get_arg_type(&pair) == TypeCode.string else {
        throw mismatch("a{sv}")
      }
      let key = MessageDecoder.readString(&pair)
      dbus_message_iter_next(&pair)
      guard dbus_message_iter_get_arg_type(&pair) == TypeCode.variant else {
        throw mismatch("a{sv}")
      }
      var content = DBusMessageIter()
      dbus_message_iter_recurse(&pair, &content)
      result[key] = try MessageDecoder.decodeCurrent(&content).unwrapped
      dbus_message_iter_next(&entries)
    }
    return result
  }

  private mutating func expect(_ code: Int32?) throws(DBusError) {
    let current = hasCurrent ? dbus_message_iter_get_arg_type(&iter) : TypeCode.invalid
    guard current != TypeCode.invalid else {
      throw DBusError(code: .unexpectedReply, message: "message has fewer arguments than expected")
    }
    if let code, current != code {
      throw Self.mismatch(String(UnicodeScalar(UInt8(truncatingIfNeeded: code))))
    }
  }

  private mutating func expectArray(of element: Int32) throws(DBusError) {
    try expect(TypeCode.array)
    guard dbus_message_iter_get_element_type(&iter) == element else {
      throw Self.mismatch("a" + String(UnicodeScalar(UInt8(truncatingIfNeeded: element))))
    }
  }

  private mutating func advance() {
    hasCurrent = dbus_message_iter_next(&iter) != 0
  }

  private static func mismatch(_ expected: String) -> DBusError {
    DBusError(code: .unexpectedReply, message: "message argument is not of type \(expected)")
  }
}

extension DBusMessage {
  /// Reads this message's arguments with a ``MessageReader``.
  public func read<Result>(
    _ body: (inout MessageReader) throws(DBusError) -> Result
  ) throws(DBusError) -> Result {
    var reader = MessageReader(raw)
    return try body(&reader)
  }
}
