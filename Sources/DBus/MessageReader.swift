// MessageReader: reading a received message's arguments one by one, into the shapes the caller
// asks for, without building a DBusValue for the whole body first.
import CDBus

/// Reads the arguments of a received message in order, straight from its bytes.
///
/// ``DBusMessage/arguments()`` gives the whole body as ``DBusValue``s; a caller that knows the
/// signature it expects can instead read each argument as what it will keep: a property
/// dictionary (`a{sv}`) comes out as `[String: DBusValue]` with the variants unwrapped, without
/// the intermediate entries and variant boxes. Each read checks the argument's type against
/// the message's signature and throws ``DBusError/Code/unexpectedReply`` on a mismatch or when
/// the arguments have run out; after a failed read the reader's position is unspecified.
///
/// A reader lives only as long as the handler given to
/// ``DBusConnection/handleSignals(_:reading:)``, or the body given to ``DBusMessage/read(_:)``.
public struct MessageReader: ~Copyable {
  private var body: WireBody
  private let types: [DBusType]
  private var index = 0

  init(_ message: OpaquePointer) throws(DBusError) {
    let signature = dbus_message_get_signature(message).map { String(cString: $0) } ?? ""
    let types = signature.isEmpty ? [] : try DBusType.parseList(signature)
    let body = try WireBody(message)
    self.types = types
    self.body = body
  }

  /// Every argument of `message` (its whole body), as ``DBusMessage/arguments()`` gives them.
  static func arguments(of message: OpaquePointer) throws(DBusError) -> [DBusValue] {
    guard let signature = dbus_message_get_signature(message), signature.pointee != 0 else {
      return []
    }
    var reader = try MessageReader(message)
    var values: [DBusValue] = []
    values.reserveCapacity(reader.types.count)
    while !reader.isAtEnd { values.append(try reader.value()) }
    return values
  }

  /// Whether every argument has been read.
  public var isAtEnd: Bool { index >= types.count }

  /// Goes back to the first argument, so the message can be read again (a quick look at one
  /// part, then the whole).
  public mutating func rewind() {
    body.rewind()
    index = 0
  }

  /// Reads an argument of any type.
  public mutating func value() throws(DBusError) -> DBusValue {
    let type = try next()
    return try body.value(type)
  }

  /// Reads a string (`s`).
  public mutating func string() throws(DBusError) -> String {
    guard try next().code == TypeCode.string else { throw mismatch("s") }
    return try body.string()
  }

  /// Reads an object path (`o`).
  public mutating func objectPath() throws(DBusError) -> ObjectPath {
    guard try next().code == TypeCode.objectPath else { throw mismatch("o") }
    return ObjectPath(unchecked: try body.string())
  }

  /// Reads an array of strings (`as`).
  public mutating func strings() throws(DBusError) -> [String] {
    guard case .array(let element) = try next().kind, element.code == TypeCode.string else {
      throw mismatch("as")
    }
    let end = try body.arrayStart(elementAlignment: 4)
    var strings: [String] = []
    while body.offset < end { strings.append(try body.string()) }
    return strings
  }

  /// Reads a property dictionary (`a{sv}`), each value unwrapped from its variant(s).
  public mutating func properties() throws(DBusError) -> [String: DBusValue] {
    guard Self.isProperties(try next()) else { throw mismatch("a{sv}") }
    return try readProperties()
  }

  /// Reads interfaces and their properties (`a{sa{sv}}`, as ObjectManager sends them), each
  /// property value unwrapped from its variant(s).
  public mutating func interfacesAndProperties() throws(DBusError)
    -> [String: [String: DBusValue]]
  {
    try nextIsInterfacesAndProperties()
    let end = try body.arrayStart(elementAlignment: 8)
    // Room for a device's or an adapter's interfaces (bluetoothd sends 3-6) without growing:
    // each growth rehashes what was read so far.
    var result: [String: [String: DBusValue]] = Dictionary(minimumCapacity: 8)
    while body.offset < end {
      try body.align(8)
      let name = try body.string()
      result[name] = try readProperties()
    }
    return result
  }

  /// Reads interfaces and their properties (`a{sa{sv}}`) without building dictionaries: each
  /// property of the interface named `interface` goes to `visit` with its value unwrapped from
  /// its variant(s), in the message's order; the other interfaces are skipped unread. Returns
  /// whether `interface` was there.
  ///
  /// An `interface` named twice throws (after visiting its first entry, whose properties the
  /// caller must then drop): read whole, the last entry replaces the first, which a visit
  /// cannot undo.
  ///
  /// For a caller that wants a few properties of one interface as soon as possible (a scan
  /// report's `Device1`), before or instead of the dictionaries of
  /// ``interfacesAndProperties()``.
  public mutating func visitProperties(
    of interface: String, _ visit: (_ name: String, _ value: DBusValue) -> Void
  ) throws(DBusError) -> Bool {
    try nextIsInterfacesAndProperties()
    var wanted = interface
    let end = try body.arrayStart(elementAlignment: 8)
    var found = false
    while body.offset < end {
      try body.align(8)
      let matches = try body.stringEquals(&wanted)
      let properties = try body.arrayStart(elementAlignment: 8)
      guard matches else {
        try body.skip(to: properties)
        continue
      }
      guard !found else {
        throw DBusError(
          code: .unexpectedReply, message: "interface \(interface) is in the message twice")
      }
      found = true
      while body.offset < properties {
        try body.align(8)
        let name = try body.string()
        visit(name, try body.variantContent().unwrapped)
      }
    }
    return found
  }

  // MARK: Helpers

  /// `a{sv}` at the cursor into a dictionary.
  private mutating func readProperties() throws(DBusError) -> [String: DBusValue] {
    let end = try body.arrayStart(elementAlignment: 8)
    guard body.offset < end else { return [:] }
    // Room for a typical object's properties (bluetoothd's Device1 has 12-18, Adapter1 ~20)
    // without growing.
    var result: [String: DBusValue] = Dictionary(minimumCapacity: 24)
    while body.offset < end {
      try body.align(8)
      let key = try body.string()
      result[key] = try body.variantContent().unwrapped
    }
    return result
  }

  /// Takes the next argument, which must be `a{sa{sv}}`.
  private mutating func nextIsInterfacesAndProperties() throws(DBusError) {
    guard case .dictionary(let key, let value) = try next().kind, key.code == TypeCode.string,
      Self.isProperties(value)
    else { throw mismatch("a{sa{sv}}") }
  }

  private static func isProperties(_ type: DBusType) -> Bool {
    guard case .dictionary(let key, let value) = type.kind else { return false }
    return key.code == TypeCode.string && value.code == TypeCode.variant
  }

  /// The next argument's type; the cursor moves past it with the read that follows.
  private mutating func next() throws(DBusError) -> DBusType {
    guard index < types.count else {
      throw DBusError(code: .unexpectedReply, message: "message has fewer arguments than expected")
    }
    defer { index += 1 }
    return types[index]
  }

  private func mismatch(_ expected: String) -> DBusError {
    DBusError(code: .unexpectedReply, message: "message argument is not of type \(expected)")
  }
}

extension DBusMessage {
  /// Reads this message's arguments with a ``MessageReader``.
  public func read<Result>(
    _ body: (inout MessageReader) throws(DBusError) -> Result
  ) throws(DBusError) -> Result {
    var reader = try MessageReader(raw)
    return try body(&reader)
  }
}
