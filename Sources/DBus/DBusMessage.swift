// DBusMessage: an owned libdbus message, with its header fields and its body as DBusValues.
import CDBus

/// One D-Bus message (method call, reply, error or signal), owning a `DBusMessage*` reference.
///
/// Not Sendable: a message is built or read by one task at a time. The connection takes
/// ownership of a message it sends.
public final class DBusMessage {
  /// The kind of message (`dbus_message_get_type`).
  public enum Kind: Int32, Sendable {
    case invalid = 0
    case methodCall = 1
    case methodReturn = 2
    case error = 3
    case signal = 4
  }

  let raw: OpaquePointer

  /// Adopts one reference to `raw` (released on deinit).
  init(adopting raw: OpaquePointer) { self.raw = raw }

  /// Takes a new reference to `raw`.
  init(retaining raw: OpaquePointer) {
    self.raw = raw
    dbus_message_ref(raw)
  }

  deinit { dbus_message_unref(raw) }

  /// A method call (`dbus_message_new_method_call`).
  public static func methodCall(
    destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName
  ) throws(DBusError) -> DBusMessage {
    let raw = dbus_message_new_method_call(
      destination?.rawValue, path.rawValue, interface?.rawValue, member.rawValue)
    guard let raw else { throw DBusError.noMemoryError }
    return DBusMessage(adopting: raw)
  }

  /// A signal (`dbus_message_new_signal`).
  public static func signal(path: ObjectPath, interface: InterfaceName, member: MemberName)
    throws(DBusError) -> DBusMessage
  {
    guard let raw = dbus_message_new_signal(path.rawValue, interface.rawValue, member.rawValue)
    else { throw DBusError.noMemoryError }
    return DBusMessage(adopting: raw)
  }

  /// A method return answering a call with `serial` from `destination`.
  static func methodReturn(replySerial: UInt32, destination: String?) throws(DBusError)
    -> DBusMessage
  {
    guard let raw = dbus_message_new(Int32(Kind.methodReturn.rawValue)) else {
      throw DBusError.noMemoryError
    }
    let message = DBusMessage(adopting: raw)
    try message.setReplyHeaders(replySerial: replySerial, destination: destination)
    return message
  }

  /// An error reply answering a call with `serial` from `destination`.
  static func errorReply(
    replySerial: UInt32, destination: String?, name: ErrorName, text: String
  ) throws(DBusError) -> DBusMessage {
    guard let raw = dbus_message_new(Int32(Kind.error.rawValue)) else {
      throw DBusError.noMemoryError
    }
    let message = DBusMessage(adopting: raw)
    try message.setReplyHeaders(replySerial: replySerial, destination: destination)
    guard dbus_message_set_error_name(raw, name.rawValue) != 0 else {
      throw DBusError.noMemoryError
    }
    try message.append([.string(text.replacing("\0", with: ""))])
    return message
  }

  private func setReplyHeaders(replySerial: UInt32, destination: String?) throws(DBusError) {
    dbus_message_set_no_reply(raw, 1)
    guard dbus_message_set_reply_serial(raw, replySerial) != 0 else {
      throw DBusError.noMemoryError
    }
    if let destination, dbus_message_set_destination(raw, destination) == 0 {
      throw DBusError.noMemoryError
    }
  }

  /// Rebuilds a message from its wire form (`dbus_message_demarshal`).
  public convenience init(wireBytes bytes: [UInt8]) throws(DBusError) {
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    let raw = bytes.withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) {
        dbus_message_demarshal($0.baseAddress, Int32($0.count), &error)
      }
    }
    guard let raw else {
      let failure = DBusError(libdbus: &error, code: .invalidArgument)
      throw failure
    }
    self.init(adopting: raw)
  }

  /// The wire form of this message (`dbus_message_marshal`). An unsent message (serial 0) is
  /// marshalled as a copy with serial 1, since a serial is required on the wire.
  public func wireBytes() throws(DBusError) -> [UInt8] {
    var source = raw
    var copy: OpaquePointer?
    if dbus_message_get_serial(raw) == 0 {
      guard let duplicate = dbus_message_copy(raw) else { throw DBusError.noMemoryError }
      dbus_message_set_serial(duplicate, 1)
      copy = duplicate
      source = duplicate
    }
    defer { if let copy { dbus_message_unref(copy) } }
    var buffer: UnsafeMutablePointer<CChar>?
    var length: Int32 = 0
    guard dbus_message_marshal(source, &buffer, &length) != 0, let buffer else {
      throw DBusError.noMemoryError
    }
    defer { dbus_free(buffer) }
    return buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
      Array(UnsafeBufferPointer(start: $0, count: Int(length)))
    }
  }

  // MARK: Header fields

  /// The kind of message.
  public var kind: Kind { Kind(rawValue: dbus_message_get_type(raw)) ?? .invalid }
  /// The body's signature.
  public var signature: Signature {
    Signature(unchecked: String(cString: dbus_message_get_signature(raw)))
  }
  /// The sender's unique name, if the message came through a bus.
  public var sender: BusName? {
    dbus_message_get_sender(raw).map { BusName(unchecked: String(cString: $0)) }
  }
  /// The destination, if set.
  public var destination: BusName? {
    dbus_message_get_destination(raw).map { BusName(unchecked: String(cString: $0)) }
  }
  /// The object path (calls and signals).
  public var path: ObjectPath? {
    dbus_message_get_path(raw).map { ObjectPath(unchecked: String(cString: $0)) }
  }
  /// The interface (calls and signals; optional on calls).
  public var interface: InterfaceName? {
    dbus_message_get_interface(raw).map { InterfaceName(unchecked: String(cString: $0)) }
  }
  /// The member (calls and signals).
  public var member: MemberName? {
    dbus_message_get_member(raw).map { MemberName(unchecked: String(cString: $0)) }
  }
  /// The error name (error replies).
  public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
  /// The serial number (assigned when sent).
  public var serial: UInt32 { dbus_message_get_serial(raw) }
  /// The serial of the call this message replies to.
  public var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }
  /// Whether the sender said it wants no reply.
  public var noReplyExpected: Bool {
    get { dbus_message_get_no_reply(raw) != 0 }
    set { dbus_message_set_no_reply(raw, newValue ? 1 : 0) }
  }

  // MARK: Body

  /// Appends values to the body, checking each against its own signature.
  public func append(_ values: [DBusValue]) throws(DBusError) {
    var iter = DBusMessageIter()
    dbus_message_iter_init_append(raw, &iter)
    for value in values {
      let type = try DBusType.of(value)
      try MessageEncoder.encode(value, as: type, into: &iter, depth: 0)
    }
  }

  /// Appends values to the body, checking them against `signature` (refused with
  /// `.invalidArgument` before anything is appended if they don't match).
  public func append(_ values: [DBusValue], signature: Signature) throws(DBusError) {
    try append(values, types: try DBusType.parseList(signature.rawValue), signature: signature)
  }

  /// Appends values checked against already parsed types (`signature`'s, named in errors).
  func append(_ values: [DBusValue], types: [DBusType], signature: Signature) throws(DBusError) {
    guard types.count == values.count else {
      throw DBusError.invalid(
        "\(values.count) values given for signature \"\(signature)\" of \(types.count) types")
    }
    var iter = DBusMessageIter()
    dbus_message_iter_init_append(raw, &iter)
    for (value, type) in zip(values, types) {
      try MessageEncoder.encode(value, as: type, into: &iter, depth: 0)
    }
  }

  /// Decodes the whole body.
  public func arguments() throws(DBusError) -> [DBusValue] {
    try MessageReader.arguments(of: raw)
  }
}

extension DBusError {
  /// Converts and frees a filled-in libdbus error.
  init(libdbus error: inout CDBus.DBusError, code: Code) {
    let name = error.name.map { String(cString: $0) }
    let message = error.message.map { String(cString: $0) } ?? "unknown libdbus error"
    dbus_error_free(&error)
    self.init(code: code, name: name, message: message)
  }
}
