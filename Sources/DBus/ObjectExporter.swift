// Answering method calls to exported objects: user methods (each in its own Task),
// org.freedesktop.DBus.Properties, Introspectable and ObjectManager.
import CDBus

/// What a reply needs to know about the call it answers.
struct IncomingCall: Sendable {
  let serial: UInt32
  let sender: String
  let noReply: Bool
  let what: CallLabel
}

private let errorFailed = "org.freedesktop.DBus.Error.Failed"
private let errorInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
private let errorUnknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
private let errorUnknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
private let errorUnknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
private let errorPropertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"

extension DBusConnection {
  // MARK: Public registration

  /// Exports `object` at `path`. Throws `.invalidArgument` if the path is taken. Emits
  /// `InterfacesAdded` from every object manager above `path`.
  public func export(_ object: ExportedObject, at path: ObjectPath) throws(DBusError) {
    let managers = try onQueueSync { () throws(DBusError) -> [ObjectPath] in
      guard !isClosed else { throw DBusError.disconnectedError() }
      guard objects[path] == nil else {
        throw DBusError.invalid("an object is already exported at \(path)")
      }
      objects[path] = object
      return objectManagers.filter { path.isDescendant(of: $0) }.sorted()
    }
    guard !managers.isEmpty else { return }
    let interfaces = Self.interfacesAndProperties(object)
    for manager in managers {
      try? emitSignal(
        path: manager, interface: .objectManager, member: "InterfacesAdded",
        arguments: [.objectPath(path), interfaces])
    }
  }

  /// Removes the object at `path`. Emits `InterfacesRemoved` from object managers above it.
  public func unexport(_ path: ObjectPath) {
    let result = try? onQueueSync { () throws(DBusError) -> (ExportedObject?, [ObjectPath]) in
      let removed = objects.removeValue(forKey: path)
      return (removed, objectManagers.filter { path.isDescendant(of: $0) }.sorted())
    }
    guard let (removed, managers) = result, let removed else { return }
    let names = DBusValue.strings(removed.interfaces.map(\.name.rawValue))
    for manager in managers {
      try? emitSignal(
        path: manager, interface: .objectManager, member: "InterfacesRemoved",
        arguments: [.objectPath(path), names])
    }
  }

  /// Makes `path` an `org.freedesktop.DBus.ObjectManager` for every exported object below it.
  /// `admit` decides who may call it (GetManagedObjects, Introspect), as
  /// ``ExportedObject/admit`` does for an object.
  public func addObjectManager(
    at path: ObjectPath, admit: (@Sendable (BusName) throws(DBusError) -> Void)? = nil
  ) throws(DBusError) {
    try onQueueSync { () throws(DBusError) in
      guard !isClosed else { throw DBusError.disconnectedError() }
      guard objectManagers.insert(path).inserted else {
        throw DBusError.invalid("an object manager already exists at \(path)")
      }
      managerAdmissions[path] = admit
    }
  }

  /// Stops answering `GetManagedObjects` at `path`.
  public func removeObjectManager(at path: ObjectPath) {
    _ = try? onQueueSync { () throws(DBusError) in
      objectManagers.remove(path)
      managerAdmissions[path] = nil
    }
  }

  /// Who may call `path`: its object's rule, else its object manager's, else (a path that only
  /// leads to exported objects, for Introspect) the rule of any object or manager below it.
  private func admission(for path: ObjectPath, object: ExportedObject?)
    -> (@Sendable (BusName) throws(DBusError) -> Void)?
  {
    if let admit = object?.admit ?? managerAdmissions[path] { return admit }
    if let below = objects.first(where: { $0.key.isDescendant(of: path) && $0.value.admit != nil })
    {
      return below.value.admit
    }
    return managerAdmissions.first { $0.key.isDescendant(of: path) }?.value
  }

  /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for an exported object.
  public func emitPropertiesChanged(
    path: ObjectPath, interface: InterfaceName, changed: [String: DBusValue],
    invalidated: [String] = []
  ) throws(DBusError) {
    try emitSignal(
      path: path, interface: .properties, member: "PropertiesChanged",
      arguments: [
        .string(interface.rawValue), .dictionaryOfVariants(changed), .strings(invalidated),
      ])
  }

  /// `a{sa{sv}}`: each interface with its current readable properties.
  static func interfacesAndProperties(_ object: ExportedObject) -> DBusValue {
    let entries = object.interfaces.map { interface in
      DBusDictEntry(
        key: .string(interface.name.rawValue),
        value: .dictionaryOfVariants(interface.propertyValues()))
    }
    return .dictionary(key: "s", value: "a{sv}", entries)
  }

  // MARK: Incoming calls

  /// Handles a method call addressed to an exported path; false if the path is not ours.
  func handleMethodCall(_ message: OpaquePointer) -> Bool {
    assertOnQueue()
    guard let cPath = dbus_message_get_path(message),
      let cMember = dbus_message_get_member(message)
    else { return false }
    let path = ObjectPath(unchecked: String(cString: cPath))
    let object = objects[path]
    let isManager = objectManagers.contains(path)
    guard object != nil || isManager || hasChildren(path) else { return false }

    let interface = dbus_message_get_interface(message).map { String(cString: $0) }
    let member = String(cString: cMember)
    let signature = String(cString: dbus_message_get_signature(message))
    let call = IncomingCall(
      serial: dbus_message_get_serial(message),
      sender: dbus_message_get_sender(message).map { String(cString: $0) } ?? "",
      noReply: dbus_message_get_no_reply(message) != 0,
      what: CallLabel(interface: interface ?? "", member: member, path: path.rawValue))
    // Who may call is decided before any of the call is decoded.
    if let admit = admission(for: path, object: object) {
      do throws(DBusError) {
        try admit(BusName(unchecked: call.sender.isEmpty ? ":0.0" : call.sender))
      } catch {
        reply(to: call, error: error)
        return true
      }
    }
    let arguments: [DBusValue]
    do throws(DBusError) {
      arguments = try MessageReader.arguments(of: message)
    } catch {
      reply(to: call, error: DBusError.remote(name: errorInvalidArgs, message: error.message))
      return true
    }

    func refuse(_ name: String, _ text: String) -> Bool {
      reply(to: call, error: DBusError.remote(name: name, message: text))
      return true
    }

    switch (interface, member) {
    case ("org.freedesktop.DBus.Introspectable", "Introspect"), (nil, "Introspect"):
      let xml = Introspection.document(
        object: object, isObjectManager: isManager, children: childNames(of: path))
      reply(to: call, values: [.string(xml)], signature: "s")
      return true
    case ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects") where isManager,
      (nil, "GetManagedObjects") where isManager:
      let managed = objects.filter { $0.key.isDescendant(of: path) }.sorted { $0.key < $1.key }
      Task.immediate(executorPreference: handlerExecutor) {
        let entries = managed.map {
          DBusDictEntry(key: .objectPath($0.key), value: Self.interfacesAndProperties($0.value))
        }
        self.reply(
          to: call, values: [.dictionary(key: "o", value: "a{sa{sv}}", entries)],
          signature: "a{oa{sa{sv}}}")
      }
      return true
    case ("org.freedesktop.DBus.Properties", _):
      guard let object else {
        return refuse(errorUnknownInterface, "no properties at \(path)")
      }
      return handleProperties(call, object: object, member: member, arguments: arguments)
    default:
      break
    }

    guard let object else {
      return refuse(errorUnknownMethod, "\(path) has no method \(member)")
    }
    var found: (ExportedInterface, ExportedMethod)?
    if let interface {
      guard let exported = object.interface(named: interface) else {
        return refuse(errorUnknownInterface, "\(path) has no interface \(interface)")
      }
      if let method = exported.methods.first(where: { $0.name.rawValue == member }) {
        found = (exported, method)
      }
    } else {
      for exported in object.interfaces {
        if let method = exported.methods.first(where: { $0.name.rawValue == member }) {
          found = (exported, method)
          break
        }
      }
    }
    guard let (exported, method) = found else {
      return refuse(errorUnknownMethod, "\(path) has no method \(interface ?? "").\(member)")
    }
    guard signature == method.inSignature.rawValue else {
      return refuse(
        errorInvalidArgs,
        "\(exported.name).\(member) takes \"\(method.inSignature)\", got \"\(signature)\"")
    }
    let invocation = MethodInvocation(
      sender: BusName(unchecked: call.sender.isEmpty ? ":0.0" : call.sender), path: path,
      interface: exported.name, member: method.name, arguments: arguments)
    let handler = method.handler
    let outSignature = method.outSignature
    let outTypes = method.outTypes
    Task.immediate(executorPreference: handlerExecutor) {
      do {
        let values = try await handler(invocation)
        self.reply(to: call, values: values, signature: outSignature, types: outTypes)
      } catch {
        self.reply(to: call, error: error)
      }
    }
    return true
  }

  private func handleProperties(
    _ call: IncomingCall, object: ExportedObject, member: String, arguments: [DBusValue]
  ) -> Bool {
    func lookup(_ interfaceName: String, _ propertyName: String) throws(DBusError)
      -> ExportedProperty
    {
      guard let interface = object.interface(named: interfaceName) else {
        throw .remote(name: errorUnknownInterface, message: "no interface \(interfaceName)")
      }
      guard let property = interface.properties.first(where: { $0.name == propertyName }) else {
        throw .remote(
          name: errorUnknownProperty, message: "no property \(interfaceName).\(propertyName)")
      }
      return property
    }
    let sender = BusName(unchecked: call.sender.isEmpty ? ":0.0" : call.sender)
    switch (member, arguments.count) {
    case ("Get", 2):
      guard let interfaceName = arguments[0].stringValue,
        let propertyName = arguments[1].stringValue
      else { break }
      Task.immediate(executorPreference: handlerExecutor) {
        do throws(DBusError) {
          let property = try lookup(interfaceName, propertyName)
          guard property.access != .write, let value = property.get() else {
            throw .remote(
              name: errorUnknownProperty,
              message: "\(interfaceName).\(propertyName) cannot be read now")
          }
          self.reply(to: call, values: [.variant(value)], signature: "v")
        } catch {
          self.reply(to: call, error: error)
        }
      }
      return true
    case ("GetAll", 1):
      guard let interfaceName = arguments[0].stringValue else { break }
      Task.immediate(executorPreference: handlerExecutor) {
        // An interface without properties (or unknown to us) answers an empty dictionary.
        let values = object.interface(named: interfaceName)?.propertyValues() ?? [:]
        self.reply(to: call, values: [.dictionaryOfVariants(values)], signature: "a{sv}")
      }
      return true
    case ("Set", 3):
      guard let interfaceName = arguments[0].stringValue,
        let propertyName = arguments[1].stringValue,
        case .variant(let value) = arguments[2]
      else { break }
      Task.immediate(executorPreference: handlerExecutor) {
        do {
          let property = try lookup(interfaceName, propertyName)
          guard property.access != .read, let set = property.set else {
            throw DBusError.remote(
              name: errorPropertyReadOnly, message: "\(interfaceName).\(propertyName) is read-only")
          }
          guard value.signature == property.signature else {
            throw DBusError.remote(
              name: errorInvalidArgs,
              message:
                "\(propertyName) has type \"\(property.signature)\", got \"\(value.signature)\"")
          }
          try set(value, sender)
          self.reply(to: call, values: [], signature: .empty)
        } catch {
          self.reply(to: call, error: error)
        }
      }
      return true
    default:
      break
    }
    reply(
      to: call,
      error: DBusError.remote(
        name: errorInvalidArgs, message: "bad arguments for Properties.\(member)"))
    return true
  }

  /// Whether any exported object or object manager lies below `path` (an intermediate node
  /// answers introspection). Checked only for a path with nothing exported at it, so a call to
  /// an exported object costs no walk over the others.
  private func hasChildren(_ path: ObjectPath) -> Bool {
    objects.keys.contains { $0.isDescendant(of: path) }
      || objectManagers.contains { $0.isDescendant(of: path) }
  }

  /// Names of the direct children of `path` among exported objects and object managers.
  func childNames(of path: ObjectPath) -> [String] {
    var names = Set<String>()
    let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
    for candidate in objects.keys where candidate.isDescendant(of: path) {
      let rest = candidate.rawValue.dropFirst(prefix.count)
      names.insert(String(rest.prefix { $0 != "/" }))
    }
    for candidate in objectManagers where candidate.isDescendant(of: path) {
      let rest = candidate.rawValue.dropFirst(prefix.count)
      names.insert(String(rest.prefix { $0 != "/" }))
    }
    return names.sorted()
  }

  // MARK: Replies

  /// Sends a method return (checked against `signature`, or its `types` when parsed already; a
  /// mismatch becomes an error reply).
  func reply(
    to call: IncomingCall, values: [DBusValue], signature: Signature, types: [DBusType]? = nil
  ) {
    guard !call.noReply else { return }
    do throws(DBusError) {
      let message = try DBusMessage.methodReturn(
        replySerial: call.serial, destination: call.sender.isEmpty ? nil : call.sender)
      if let types {
        try message.append(values, types: types, signature: signature)
      } else {
        try message.append(values, signature: signature)
      }
      try send(message)
    } catch {
      reply(
        to: call,
        error: DBusError.remote(
          name: errorFailed, message: "\(call.what) produced a bad reply: \(error.message)"))
    }
  }

  /// Sends an error reply for `error` (a `.remote` DBusError keeps its name).
  func reply(to call: IncomingCall, error: any Error) {
    guard !call.noReply else { return }
    var name = errorFailed
    var text = "\(error)"
    if let error = error as? DBusError {
      text = error.message
      if error.code == .remote, let errorName = error.name, ErrorName.isValid(errorName) {
        name = errorName
      } else {
        text = error.description
      }
    }
    guard
      let message = try? DBusMessage.errorReply(
        replySerial: call.serial, destination: call.sender.isEmpty ? nil : call.sender,
        name: ErrorName(unchecked: name), text: text)
    else { return }
    try? send(message)
  }
}
