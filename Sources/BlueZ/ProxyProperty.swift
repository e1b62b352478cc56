// The property tables of BlueZ proxies: one typed row per D-Bus property, decoded on demand.
import DBus

/// A BlueZ interface seen from the client side: a typed view of one object's interface.
///
/// Each conforming type names its D-Bus interface, lists its properties in ``propertyTable``,
/// and is built from a snapshot of the object's properties (as kept by ``BlueZObjectTree``).
public protocol BlueZProxy: Sendable {
  /// The D-Bus interface this proxy speaks, e.g. `org.bluez.Device1`.
  static var interface: InterfaceName { get }
  /// Every property blekit knows on this interface: name, D-Bus type, required or optional.
  static var propertyTable: [PropertyRow] { get }
  /// The object this proxy views (path, properties, connection).
  var snapshot: ProxySnapshot { get }
  /// Makes a proxy without checking the table; use ``make(path:properties:connection:)``.
  init(snapshot: ProxySnapshot)
}

/// What every proxy holds: one object's path, a snapshot of its properties on the proxy's
/// interface, and the connection its method calls go through.
public struct ProxySnapshot: Sendable {
  /// The object path of the remote object.
  public let path: ObjectPath
  /// The property values (variants unwrapped).
  public let properties: [String: DBusValue]
  /// The bus connection that method calls go through.
  public let connection: DBusConnection

  public init(path: ObjectPath, properties: [String: DBusValue], connection: DBusConnection) {
    self.path = path
    self.properties = properties
    self.connection = connection
  }
}

extension BlueZProxy {
  /// The object path of the remote object.
  public var path: ObjectPath { snapshot.path }
  /// The property values of the snapshot this proxy was made from (variants unwrapped).
  public var properties: [String: DBusValue] { snapshot.properties }
  /// The bus connection that method calls go through.
  public var connection: DBusConnection { snapshot.connection }

  /// Makes a proxy without checking the table; use ``make(path:properties:connection:)``.
  public init(
    uncheckedPath path: ObjectPath, properties: [String: DBusValue], connection: DBusConnection
  ) {
    self.init(snapshot: ProxySnapshot(path: path, properties: properties, connection: connection))
  }
}

/// One typed property of a BlueZ interface.
///
/// A row knows its D-Bus name and type, whether BlueZ always provides it, and how to decode it.
/// Reading an absent optional property gives `nil`; a present value of the wrong D-Bus type
/// decodes to `nil` too, and a required one that is absent or ill-typed fails ``BlueZProxy/make``.
public struct ProxyProperty<Proxy: BlueZProxy, Value: Sendable>: Sendable {
  /// The D-Bus property name, e.g. `RSSI`.
  public let name: String
  /// The D-Bus type of the property, e.g. `n`.
  public let signature: Signature
  /// Whether BlueZ always provides this property on the interface.
  public let isRequired: Bool
  private let decoder: @Sendable (DBusValue) -> Value?

  /// Describes a property: its name, type, presence and decoder.
  public init(
    _ name: String, _ signature: Signature, required: Bool = false,
    decode: @escaping @Sendable (DBusValue) -> Value?
  ) {
    self.name = name
    self.signature = signature
    self.isRequired = required
    self.decoder = decode
  }

  /// Decodes a raw D-Bus value (variants looked through); `nil` when it has the wrong type.
  public func decode(_ raw: DBusValue) -> Value? { decoder(raw) }

  /// The untyped row of the interface's table.
  public var row: PropertyRow {
    let decoder = self.decoder
    return PropertyRow(
      name: name, signature: signature, isRequired: isRequired,
      isValid: { decoder($0) != nil })
  }
}

/// An untyped row of a property table, for validation and listing.
public struct PropertyRow: Sendable {
  public let name: String
  public let signature: Signature
  public let isRequired: Bool
  /// Whether a raw value decodes as this property's type.
  public let isValid: @Sendable (DBusValue) -> Bool
}

extension BlueZProxy {
  /// Makes a proxy from a property snapshot, checking that every required property is present
  /// and decodes.
  public static func make(
    path: ObjectPath, properties: [String: DBusValue], connection: DBusConnection
  ) throws(BlueZError) -> Self {
    for row in propertyTable where row.isRequired {
      guard let value = properties[row.name] else {
        throw BlueZError(
          .unexpectedValue, "\(interface) on \(path) lacks required property \(row.name)")
      }
      guard row.isValid(value) else {
        throw BlueZError(
          .unexpectedValue,
          "\(interface).\(row.name) on \(path) is not of type \(row.signature)")
      }
    }
    return Self(uncheckedPath: path, properties: properties, connection: connection)
  }

  /// The decoded value of a property, or `nil` when it is absent (or of the wrong type).
  /// Inlinable, so that callers read properties without a generic call (this runs for every
  /// property of every scan report).
  @inlinable
  public subscript<Value>(_ property: ProxyProperty<Self, Value>) -> Value? {
    properties[property.name].flatMap(property.decode)
  }

  /// Calls a method of this interface on this object and returns the reply's arguments.
  ///
  /// Bus and BlueZ errors are mapped into ``BlueZError``.
  public func call(
    _ member: MemberName, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
  ) async throws(BlueZError) -> [DBusValue] {
    do throws(DBusError) {
      return try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface, member: member,
        arguments: arguments, timeout: timeout)
    } catch {
      throw BlueZError(error)
    }
  }

  /// A proxy made from bluetoothd's current values of every property of this interface on
  /// `path` (`org.freedesktop.DBus.Properties.GetAll`), not from a cached snapshot.
  public static func current(at path: ObjectPath, on connection: DBusConnection)
    async throws(BlueZError) -> Self
  {
    let properties = try await allProperties(of: interface, at: path, on: connection)
    return try make(path: path, properties: properties, connection: connection)
  }

  /// Sets a property through `org.freedesktop.DBus.Properties.Set`.
  public func set<Value>(
    _ property: ProxyProperty<Self, Value>, to value: DBusValue
  ) async throws(BlueZError) {
    do throws(DBusError) {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: BlueZ.Interface.properties,
        member: "Set",
        arguments: [.string(Self.interface.rawValue), .string(property.name), .variant(value)])
    } catch {
      throw BlueZError(error)
    }
  }
}

/// Every property of `interface` on `path`, variants unwrapped
/// (`org.freedesktop.DBus.Properties.GetAll`).
func allProperties(of interface: InterfaceName, at path: ObjectPath, on connection: DBusConnection)
  async throws(BlueZError) -> [String: DBusValue]
{
  let reply: [DBusValue]
  do throws(DBusError) {
    reply = try await connection.call(
      destination: BlueZ.service, path: path, interface: BlueZ.Interface.properties,
      member: "GetAll", arguments: [.string(interface.rawValue)])
  } catch {
    throw BlueZError(error)
  }
  guard let all = reply.first?.stringVariantDictionary else {
    throw BlueZError(.unexpectedValue, "GetAll of \(interface) on \(path) returned no a{sv}")
  }
  return all
}

/// A change to a property, as reported by `PropertiesChanged`.
public enum PropertyUpdate<Value: Sendable>: Sendable {
  /// The property has this new value.
  case changed(Value)
  /// The property was invalidated or removed (or its new value had the wrong type).
  case removed
}

/// The typed view of one `PropertiesChanged` signal on one interface, read through the
/// interface's property table.
public struct PropertyChanges<Proxy: BlueZProxy>: Sendable {
  /// The changed values (variants unwrapped).
  public let changed: [String: DBusValue]
  /// The names of invalidated properties.
  public let invalidated: [String]

  public init(changed: [String: DBusValue], invalidated: [String]) {
    self.changed = changed
    self.invalidated = invalidated
  }

  /// What happened to `property` in this signal, or `nil` when it was not mentioned.
  public subscript<Value>(_ property: ProxyProperty<Proxy, Value>) -> PropertyUpdate<Value>? {
    if let raw = changed[property.name] {
      return property.decode(raw).map { .changed($0) } ?? .removed
    }
    return invalidated.contains(property.name) ? .removed : nil
  }

  /// Whether `property` was mentioned in this signal.
  public func contains<Value>(_ property: ProxyProperty<Proxy, Value>) -> Bool {
    changed[property.name] != nil || invalidated.contains(property.name)
  }

  /// The names of the properties mentioned that the interface's table does not know.
  public var unknownNames: [String] {
    let known = Set(Proxy.propertyTable.map(\.name))
    return (Array(changed.keys) + invalidated).filter { !known.contains($0) }.sorted()
  }
}

/// Decoders shared by the property tables.
enum Decode {
  static let string: @Sendable (DBusValue) -> String? = { $0.stringValue }
  static let bool: @Sendable (DBusValue) -> Bool? = { $0.boolValue }
  static let int16: @Sendable (DBusValue) -> Int16? = { $0.int16Value }
  static let uint16: @Sendable (DBusValue) -> UInt16? = { $0.uint16Value }
  static let uint32: @Sendable (DBusValue) -> UInt32? = { $0.uint32Value }
  static let path: @Sendable (DBusValue) -> ObjectPath? = { $0.objectPathValue }
  static let strings: @Sendable (DBusValue) -> [String]? = { $0.stringArrayValue }
  static let bytes: @Sendable (DBusValue) -> [UInt8]? = { $0.bytesValue }
  static let paths: @Sendable (DBusValue) -> [ObjectPath]? = { value in
    guard let items = value.arrayValue else { return nil }
    let paths = items.compactMap(\.objectPathValue)
    return paths.count == items.count ? paths : nil
  }
  /// `a{qv}` with byte-array values, e.g. ManufacturerData.
  static let bytesByUInt16: @Sendable (DBusValue) -> [UInt16: [UInt8]]? = { value in
    guard let entries = value.dictionaryValue else { return nil }
    var result: [UInt16: [UInt8]] = [:]
    for entry in entries {
      guard let key = entry.key.uint16Value, let bytes = entry.value.bytesValue else { return nil }
      result[key] = bytes
    }
    return result
  }
  /// `a{sv}` with byte-array values, e.g. ServiceData.
  static let bytesByString: @Sendable (DBusValue) -> [String: [UInt8]]? = { value in
    guard let entries = value.dictionaryValue else { return nil }
    var result: [String: [UInt8]] = [:]
    for entry in entries {
      guard let key = entry.key.stringValue, let bytes = entry.value.bytesValue else { return nil }
      result[key] = bytes
    }
    return result
  }
}
