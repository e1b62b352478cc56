// org.bluez.Agent1, exported: answers bluetoothd's pairing questions (passkeys, confirmations).
import DBus
import Synchronization

/// One question bluetoothd asks a pairing agent (BlueZ's `doc/org.bluez.Agent.rst`).
public enum AgentRequest: Sendable, Hashable {
  /// `RequestPinCode(o) -> s`: a legacy PIN code (1-16 characters) is wanted.
  case requestPinCode(device: ObjectPath)
  /// `DisplayPinCode(os)`: show this PIN code until `Cancel`.
  case displayPinCode(device: ObjectPath, pinCode: String)
  /// `RequestPasskey(o) -> u`: a passkey (0...999999) shown on the other device is wanted.
  case requestPasskey(device: ObjectPath)
  /// `DisplayPasskey(ouq)`: show this passkey; `entered` keys were typed on the other side.
  case displayPasskey(device: ObjectPath, passkey: UInt32, entered: UInt16)
  /// `RequestConfirmation(ou)`: does the other device show the same passkey?
  case requestConfirmation(device: ObjectPath, passkey: UInt32)
  /// `RequestAuthorization(o)`: allow an incoming "just works" pairing?
  case requestAuthorization(device: ObjectPath)
  /// `AuthorizeService(os)`: allow a connection to this service?
  case authorizeService(device: ObjectPath, uuid: String)

  /// The Device1 object the question is about.
  public var device: ObjectPath {
    switch self {
    case .requestPinCode(let device), .displayPinCode(let device, _),
      .requestPasskey(let device), .displayPasskey(let device, _, _),
      .requestConfirmation(let device, _), .requestAuthorization(let device),
      .authorizeService(let device, _):
      device
    }
  }

  /// The D-Bus member name of the question.
  public var member: String {
    switch self {
    case .requestPinCode: "RequestPinCode"
    case .displayPinCode: "DisplayPinCode"
    case .requestPasskey: "RequestPasskey"
    case .displayPasskey: "DisplayPasskey"
    case .requestConfirmation: "RequestConfirmation"
    case .requestAuthorization: "RequestAuthorization"
    case .authorizeService: "AuthorizeService"
    }
  }
}

/// An agent's answer to an ``AgentRequest``.
public enum AgentAnswer: Sendable, Hashable {
  /// Yes (the empty reply); the only answer for displays, confirmations and authorizations.
  case accept
  /// The answer to ``AgentRequest/requestPinCode(device:)``.
  case pinCode(String)
  /// The answer to ``AgentRequest/requestPasskey(device:)``.
  case passkey(UInt32)
}

/// An agent's refusal, sent to bluetoothd as `org.bluez.Error.Rejected` or `.Canceled`.
public enum AgentRefusal: Error, Sendable, Hashable {
  /// The user (or the policy) said no.
  case rejected(String)
  /// The question was dropped, e.g. the prompt was interrupted.
  case canceled(String)

  var dbusError: DBusError {
    switch self {
    case .rejected(let message):
      DBusError.remote(name: BlueZError.errorPrefix + "Rejected", message: message)
    case .canceled(let message):
      DBusError.remote(name: BlueZError.errorPrefix + "Canceled", message: message)
    }
  }
}

/// A pairing agent to export as `org.bluez.Agent1`: what to answer, and what to do when
/// bluetoothd cancels a question or releases the agent.
///
/// Every method refuses callers other than bluetoothd (see ``BluetoothdCallerCheck``) with
/// `org.bluez.Error.NotAuthorized`.
public struct Agent1: Sendable {
  /// The D-Bus interface this value is exported as.
  public static let interface = BlueZ.Interface.agent

  /// Answers one question; throw an ``AgentRefusal`` to say no.
  public var answer: @Sendable (AgentRequest) async throws(AgentRefusal) -> AgentAnswer
  /// `Cancel()`: the pending question was abandoned by bluetoothd (e.g. the pairing failed).
  public var cancel: @Sendable () -> Void
  /// `Release()`: bluetoothd unregistered the agent by itself.
  public var release: @Sendable () -> Void

  public init(
    answer: @escaping @Sendable (AgentRequest) async throws(AgentRefusal) -> AgentAnswer,
    cancel: @escaping @Sendable () -> Void = {}, release: @escaping @Sendable () -> Void = {}
  ) {
    self.answer = answer
    self.cancel = cancel
    self.release = release
  }

  /// Decodes a call's member and arguments into a request; `nil` for anything else (the
  /// in-signatures are checked by the DBus layer before this runs).
  public static func request(member: String, arguments: [DBusValue]) -> AgentRequest? {
    let device = arguments.first?.objectPathValue
    switch (member, device) {
    case ("RequestPinCode", let device?):
      return .requestPinCode(device: device)
    case ("DisplayPinCode", let device?):
      guard arguments.count == 2, let pin = arguments[1].stringValue else { return nil }
      return .displayPinCode(device: device, pinCode: pin)
    case ("RequestPasskey", let device?):
      return .requestPasskey(device: device)
    case ("DisplayPasskey", let device?):
      guard arguments.count == 3, let passkey = arguments[1].uint32Value,
        let entered = arguments[2].uint16Value
      else { return nil }
      return .displayPasskey(device: device, passkey: passkey, entered: entered)
    case ("RequestConfirmation", let device?):
      guard arguments.count == 2, let passkey = arguments[1].uint32Value else { return nil }
      return .requestConfirmation(device: device, passkey: passkey)
    case ("RequestAuthorization", let device?):
      return .requestAuthorization(device: device)
    case ("AuthorizeService", let device?):
      guard arguments.count == 2, let uuid = arguments[1].stringValue else { return nil }
      return .authorizeService(device: device, uuid: uuid)
    default:
      return nil
    }
  }

  /// The reply body for `answer` to `request`, or the refusal when the answer does not fit
  /// the question (a passkey above 999999, a PIN code not 1-16 characters, a wrong kind).
  public static func reply(to request: AgentRequest, with answer: AgentAnswer)
    throws(AgentRefusal) -> [DBusValue]
  {
    switch (request, answer) {
    case (.requestPinCode, .pinCode(let pin)):
      guard (1...16).contains(pin.count) else {
        throw .rejected("a PIN code has 1 to 16 characters")
      }
      return [.string(pin)]
    case (.requestPasskey, .passkey(let passkey)):
      guard passkey <= 999_999 else { throw .rejected("a passkey is at most 999999") }
      return [.uint32(passkey)]
    case (.requestPinCode, _):
      throw .rejected("no PIN code was given")
    case (.requestPasskey, _):
      throw .rejected("no passkey was given")
    case (_, .accept):
      return []
    default:
      throw .rejected("answer \(answer) does not fit \(request.member)")
    }
  }

  /// The members of `org.bluez.Agent1` with their in- and out-signatures.
  static let methods: [(name: MemberName, input: Signature, output: Signature)] = [
    ("RequestPinCode", "o", "s"),
    ("DisplayPinCode", "os", ""),
    ("RequestPasskey", "o", "u"),
    ("DisplayPasskey", "ouq", ""),
    ("RequestConfirmation", "ou", ""),
    ("RequestAuthorization", "o", ""),
    ("AuthorizeService", "os", ""),
  ]

  /// The exported object, every method guarded by `callerCheck`.
  public func exportedObject(callerCheck: BluetoothdCallerCheck) -> ExportedObject {
    let answer = self.answer
    var methods = Self.methods.map { method in
      ExportedMethod(name: method.name, inSignature: method.input, outSignature: method.output) {
        invocation in
        try callerCheck.check(invocation.sender)
        guard
          let request = Self.request(
            member: invocation.member.rawValue, arguments: invocation.arguments)
        else {
          throw AgentRefusal.rejected("malformed \(invocation.member) call").dbusError
        }
        do throws(AgentRefusal) {
          return try Self.reply(to: request, with: try await answer(request))
        } catch {
          throw error.dbusError
        }
      }
    }
    let cancel = self.cancel
    let release = self.release
    methods.append(
      ExportedMethod(name: "Cancel", inSignature: "", outSignature: "") { invocation in
        try callerCheck.check(invocation.sender)
        cancel()
        return []
      })
    methods.append(
      ExportedMethod(name: "Release", inSignature: "", outSignature: "") { invocation in
        try callerCheck.check(invocation.sender)
        release()
        return []
      })
    return ExportedObject(interfaces: [ExportedInterface(name: Self.interface, methods: methods)])
  }
}

extension AgentManager1 {
  /// Exports `agent` at `path`, registers it with `capability`, and, when `asDefault`, makes it
  /// the default agent (the one asked about pairings a remote device starts).
  ///
  /// If any step fails, nothing stays registered or exported.
  public func register(
    _ agent: Agent1, at path: ObjectPath, capability: AgentCapability, asDefault: Bool = false,
    callerCheck: BluetoothdCallerCheck
  ) async throws(BlueZError) -> AgentRegistration {
    let registration = AgentRegistration(
      manager: self, path: path, capability: capability, asDefault: asDefault)
    var exported = agent
    let release = agent.release
    exported.release = { [weak registration] in
      registration?.released()
      release()
    }
    var object = exported.exportedObject(callerCheck: callerCheck)
    object.admit = { sender throws(DBusError) in try callerCheck.check(sender) }
    do {
      try connection.export(object, at: path)
    } catch {
      throw BlueZError(error)
    }
    do {
      try await registerAgent(path, capability: capability)
    } catch {
      connection.unexport(path)
      registration.released()
      throw error
    }
    if asDefault {
      do {
        try await requestDefaultAgent(path)
      } catch {
        await registration.unregister()
        throw error
      }
    }
    return registration
  }
}

/// A registered agent. ``unregister()`` unregisters it and removes the exported object.
public final class AgentRegistration: Sendable {
  public var path: ObjectPath { state.path }
  /// The capability it was registered with.
  public let capability: AgentCapability
  /// Whether it asked to be the default agent.
  public let asDefault: Bool
  private let manager: AgentManager1
  private let state: RegistrationState

  init(manager: AgentManager1, path: ObjectPath, capability: AgentCapability, asDefault: Bool) {
    self.manager = manager
    self.state = RegistrationState(path: path, connection: manager.connection)
    self.capability = capability
    self.asDefault = asDefault
  }

  /// Registers the still-exported agent again, with the same capability (and as the default
  /// agent again if it was): for a bluetoothd that restarted and so forgot every agent.
  /// - Throws: ``BlueZError/Code/doesNotExist`` after ``unregister()``; bluetoothd's error
  ///   otherwise (`AlreadyExists` when it still knows the agent).
  public func registerAgain() async throws(BlueZError) {
    guard state.isExported else {
      throw BlueZError(.doesNotExist, "the agent at \(path) was unregistered")
    }
    try await manager.registerAgent(path, capability: capability)
    state.registeredAgain()
    if asDefault { try await manager.requestDefaultAgent(path) }
  }

  /// False once unregistered or released by bluetoothd.
  public var isRegistered: Bool { state.isRegistered }

  func released() {
    state.released()
  }

  /// Unregisters (unless bluetoothd already released it) and unexports. Idempotent.
  @discardableResult
  public func unregister() async -> BlueZError? {
    let manager = self.manager
    let path = self.path
    return await state.unregister { () throws(BlueZError) in
      try await manager.unregisterAgent(path)
    }
  }
}
