// Descriptions of objects this process exports on the bus: interfaces, methods, properties,
// signals. Plain values; the connection answers calls to them.

/// An object to export at a path: a list of interfaces.
///
/// The library also answers `org.freedesktop.DBus.Properties`, `Introspectable` and `Peer`
/// for it.
public struct ExportedObject: Sendable {
  public var interfaces: [ExportedInterface]
  /// Decides who may call the object at all, before anything of the call is decoded: every
  /// method, `Properties` (Get, GetAll, Set) and `Introspect`. It throws the error the caller
  /// gets (e.g. only bluetoothd may call a GATT application's objects). `nil`: anyone.
  public var admit: (@Sendable (BusName) throws(DBusError) -> Void)?

  public init(
    interfaces: [ExportedInterface],
    admit: (@Sendable (BusName) throws(DBusError) -> Void)? = nil
  ) {
    self.interfaces = interfaces
    self.admit = admit
  }

  func interface(named name: String) -> ExportedInterface? {
    interfaces.first { $0.name.rawValue == name }
  }
}

/// One interface of an exported object.
public struct ExportedInterface: Sendable {
  public var name: InterfaceName
  public var methods: [ExportedMethod]
  public var properties: [ExportedProperty]
  public var signals: [ExportedSignal]

  public init(
    name: InterfaceName, methods: [ExportedMethod] = [], properties: [ExportedProperty] = [],
    signals: [ExportedSignal] = []
  ) {
    self.name = name
    self.methods = methods
    self.properties = properties
    self.signals = signals
  }

  /// The readable properties that currently have a value, as `a{sv}` entries.
  func propertyValues() -> [String: DBusValue] {
    var values: [String: DBusValue] = [:]
    for property in properties where property.access != .write {
      if let value = property.get() { values[property.name] = value }
    }
    return values
  }
}

/// A method of an exported interface.
///
/// Calls whose arguments don't match `inSignature` are refused with
/// `org.freedesktop.DBus.Error.InvalidArgs` before the handler runs. The handler runs in its
/// own Task, which starts at once (`Task.immediate`) on the thread that dispatches the call,
/// inside the connection's serial queue, and prefers the connection's executor after: a quick
/// handler replies with no thread hand-off at all. Don't block in a handler (no semaphores, no
/// sleeping threads, no long computation): until its first suspension it holds the queue and
/// the thread that reads every connection; anything it awaits elsewhere moves it off both. Its
/// return values must match `outSignature` (a mismatch is answered with
/// `org.freedesktop.DBus.Error.Failed`). Throwing a `DBusError` with code `.remote` and a name
/// sends that error; any other error becomes `org.freedesktop.DBus.Error.Failed`.
public struct ExportedMethod: Sendable {
  public var name: MemberName
  public var inSignature: Signature
  public var outSignature: Signature {
    didSet { outTypes = try? DBusType.parseList(outSignature.rawValue) }
  }
  /// `outSignature` parsed once, for every reply (nil only if libdbus would refuse it).
  private(set) var outTypes: [DBusType]?
  /// Argument names for introspection (optional; `arg0`, `arg1`, ... otherwise).
  public var inArgumentNames: [String]
  public var outArgumentNames: [String]
  public var handler: @Sendable (MethodInvocation) async throws -> [DBusValue]

  public init(
    name: MemberName, inSignature: Signature, outSignature: Signature,
    inArgumentNames: [String] = [], outArgumentNames: [String] = [],
    handler: @escaping @Sendable (MethodInvocation) async throws -> [DBusValue]
  ) {
    self.name = name
    self.inSignature = inSignature
    self.outSignature = outSignature
    self.outTypes = try? DBusType.parseList(outSignature.rawValue)
    self.inArgumentNames = inArgumentNames
    self.outArgumentNames = outArgumentNames
    self.handler = handler
  }
}

/// One incoming call of an exported method.
public struct MethodInvocation: Sendable {
  /// The caller's unique name (`:1.42`), so a handler can refuse strangers.
  public let sender: BusName
  public let path: ObjectPath
  public let interface: InterfaceName
  public let member: MemberName
  public let arguments: [DBusValue]

  public init(
    sender: BusName, path: ObjectPath, interface: InterfaceName, member: MemberName,
    arguments: [DBusValue]
  ) {
    self.sender = sender
    self.path = path
    self.interface = interface
    self.member = member
    self.arguments = arguments
  }
}

/// A property of an exported interface.
public struct ExportedProperty: Sendable {
  /// Who may read or write the property.
  public enum Access: String, Sendable {
    case read
    case readWrite = "readwrite"
    case write
  }

  public var name: String
  public var signature: Signature
  public var access: Access
  /// The current value; nil means the property is absent right now (left out of GetAll).
  public var get: @Sendable () -> DBusValue?
  /// Applies a new value from the given sender; throw to refuse.
  public var set: (@Sendable (DBusValue, BusName) throws -> Void)?

  public init(
    name: String, signature: Signature, access: Access,
    get: @escaping @Sendable () -> DBusValue?,
    set: (@Sendable (DBusValue, BusName) throws -> Void)? = nil
  ) {
    self.name = name
    self.signature = signature
    self.access = access
    self.get = get
    self.set = set
  }
}

/// A signal of an exported interface (for introspection).
public struct ExportedSignal: Sendable {
  public var name: MemberName
  public var signature: Signature
  public var argumentNames: [String]

  public init(name: MemberName, signature: Signature, argumentNames: [String] = []) {
    self.name = name
    self.signature = signature
    self.argumentNames = argumentNames
  }
}
