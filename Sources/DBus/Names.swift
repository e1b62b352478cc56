// Validated D-Bus names: object paths, bus names, interface, member and error names, signatures.
import CDBus

#if canImport(Glibc)
  import Glibc
#endif

/// Behaviour shared by the validated D-Bus name types.
///
/// Each conforming type checks its string with the matching libdbus validator at construction,
/// so an invalid name can never reach the wire.
public protocol DBusName: RawRepresentable<String>, Hashable, Sendable, Comparable,
  CustomStringConvertible, ExpressibleByStringLiteral
{
  /// Whether `string` is a valid name of this kind.
  static func isValid(_ string: String) -> Bool
  /// A short word for error messages ("object path", "bus name", ...).
  static var kindDescription: String { get }
  /// Wraps a string already known to be valid (e.g. read from a message libdbus validated).
  init(unchecked string: String)
}

extension DBusName {
  /// Validates `rawValue`; nil if it is not a valid name of this kind.
  public init?(rawValue: String) {
    guard Self.isValid(rawValue) else { return nil }
    self.init(unchecked: rawValue)
  }

  /// Validates `string`, throwing `DBusError` with code `.invalidArgument` if it is invalid.
  public init(_ string: String) throws(DBusError) {
    guard Self.isValid(string) else {
      throw DBusError(
        code: .invalidArgument, message: "invalid \(Self.kindDescription): \"\(string)\"")
    }
    self.init(unchecked: string)
  }

  /// Traps on an invalid literal: a literal is a programmer's promise.
  public init(stringLiteral value: String) {
    guard Self.isValid(value) else {
      preconditionFailure("invalid \(Self.kindDescription) literal: \"\(value)\"")
    }
    self.init(unchecked: value)
  }

  public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
  public var description: String { rawValue }
}

/// Runs a libdbus validator over `string`, refusing embedded NULs first.
private func validate(
  _ string: String,
  _ validator: (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t
) -> Bool {
  // An embedded NUL would cut the C string short: the C length must be the whole length.
  // (`strlen` rather than a scan of the UTF-8 view: names are checked on every signal read.)
  let length = string.utf8.count
  return string.withCString { strlen($0) == length && validator($0, nil) != 0 }
}

/// An object path such as `/org/bluez/hci0`. Validated with `dbus_validate_path`.
public struct ObjectPath: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "object path"
  public static func isValid(_ string: String) -> Bool { validate(string, dbus_validate_path) }

  /// The root path `/`.
  public static let root = ObjectPath(unchecked: "/")

  /// This path with one more component. Traps if `component` is not a valid path element
  /// (ASCII letters, digits and `_`, non-empty); use `appending(checked:)` for untrusted input.
  public func appending(_ component: String) -> ObjectPath {
    do {
      return try appending(checked: component)
    } catch {
      preconditionFailure(error.description)
    }
  }

  /// This path with one more component, throwing `.invalidArgument` if the result is invalid.
  public func appending(checked component: String) throws(DBusError) -> ObjectPath {
    if component.isEmpty || component.contains("/") {
      throw DBusError(code: .invalidArgument, message: "invalid path component: \"\(component)\"")
    }
    return try ObjectPath(rawValue == "/" ? "/" + component : rawValue + "/" + component)
  }

  /// The enclosing path, or nil for `/`.
  public var parent: ObjectPath? {
    guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return nil }
    if slash == rawValue.startIndex { return .root }
    return ObjectPath(unchecked: String(rawValue[..<slash]))
  }

  /// The last component, or "" for `/`.
  public var lastComponent: String {
    guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return "" }
    return String(rawValue[rawValue.index(after: slash)...])
  }

  /// Whether this path lies strictly below `ancestor` (a path is not its own descendant).
  public func isDescendant(of ancestor: ObjectPath) -> Bool {
    if ancestor.rawValue == "/" { return rawValue != "/" }
    // Compared as C strings (paths hold no NUL): this runs for every device report of a scan.
    let length = ancestor.rawValue.utf8.count
    guard rawValue.utf8.count > length else { return false }
    return rawValue.withCString { path in
      ancestor.rawValue.withCString { memcmp(path, $0, length) == 0 }
        && path[length] == CChar(UInt8(ascii: "/"))
    }
  }
}

/// A unique (`:1.42`) or well-known (`org.bluez`) bus name. Validated with
/// `dbus_validate_bus_name`.
public struct BusName: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "bus name"
  public static func isValid(_ string: String) -> Bool { validate(string, dbus_validate_bus_name) }
  /// The message bus itself, `org.freedesktop.DBus`.
  public static let bus = BusName(unchecked: "org.freedesktop.DBus")
  /// Whether this is a unique connection name (starts with `:`).
  public var isUnique: Bool { rawValue.hasPrefix(":") }
}

/// An interface name such as `org.bluez.Device1`. Validated with `dbus_validate_interface`.
public struct InterfaceName: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "interface name"
  public static func isValid(_ string: String) -> Bool { validate(string, dbus_validate_interface) }

  /// `org.freedesktop.DBus.Properties`.
  public static let properties = InterfaceName(unchecked: "org.freedesktop.DBus.Properties")
  /// `org.freedesktop.DBus.Introspectable`.
  public static let introspectable = InterfaceName(
    unchecked: "org.freedesktop.DBus.Introspectable")
  /// `org.freedesktop.DBus.ObjectManager`.
  public static let objectManager = InterfaceName(unchecked: "org.freedesktop.DBus.ObjectManager")
  /// `org.freedesktop.DBus.Peer`.
  public static let peer = InterfaceName(unchecked: "org.freedesktop.DBus.Peer")
  /// `org.freedesktop.DBus` (the bus daemon's own interface).
  public static let bus = InterfaceName(unchecked: "org.freedesktop.DBus")
}

/// A method or signal name such as `Connect`. Validated with `dbus_validate_member`.
public struct MemberName: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "member name"
  public static func isValid(_ string: String) -> Bool { validate(string, dbus_validate_member) }
}

/// An error name such as `org.bluez.Error.Failed`. Validated with `dbus_validate_error_name`.
public struct ErrorName: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "error name"
  public static func isValid(_ string: String) -> Bool {
    validate(string, dbus_validate_error_name)
  }
}

/// A type signature such as `a{sv}`. Validated with `dbus_signature_validate`; it may hold any
/// number of complete types (a message body's signature), including none.
public struct Signature: DBusName {
  public let rawValue: String
  public init(unchecked string: String) { rawValue = string }
  public static let kindDescription = "signature"
  public static func isValid(_ string: String) -> Bool {
    validate(string, dbus_signature_validate)
  }

  /// Validates that `string` is exactly one complete type (`dbus_signature_validate_single`).
  public init(singleCompleteType string: String) throws(DBusError) {
    try self.init(string)
    guard isSingleCompleteType else {
      throw DBusError(
        code: .invalidArgument, message: "not a single complete type: \"\(string)\"")
    }
  }

  /// Whether this signature is exactly one complete type.
  public var isSingleCompleteType: Bool {
    rawValue.withCString { dbus_signature_validate_single($0, nil) != 0 }
  }

  /// The complete types this signature is made of, in order (`"sa{sv}"` -> `["s", "a{sv}"]`).
  public var completeTypes: [Signature] {
    (try? DBusType.parseList(rawValue).map(\.signature)) ?? []
  }

  /// The empty signature (no values).
  public static let empty = Signature(unchecked: "")
}
