// PairingAgent: blekit's org.bluez.Agent1, answering pairing questions by a policy.
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// How a ``PairingAgent`` answers the questions that need a person.
public enum PairingConfirmation: Sendable {
  /// Confirm passkeys and authorize pairings and services without asking (each is reported
  /// as a ``PairingAgentEvent``). Questions that need typed input (a passkey or PIN code shown
  /// on the other device) are refused: nobody can read them.
  case automatic
  /// Ask through this closure; it returns the answer, or `nil` to refuse. It is cancelled
  /// when bluetoothd cancels the question.
  case prompt(@Sendable (PairingQuestion) async -> AgentAnswer?)
}

/// A question for the person at this host.
public struct PairingQuestion: Sendable, Hashable {
  /// What bluetoothd asks.
  public var request: AgentRequest
  /// The other device's address, read from the device object's path.
  public var address: BluetoothAddress?

  public init(request: AgentRequest, address: BluetoothAddress?) {
    self.request = request
    self.address = address
  }
}

/// What the agent did, for the log (the CLI prints these on standard error).
public enum PairingAgentEvent: Sendable, Hashable {
  /// A passkey was confirmed (numeric comparison), by the policy or by the person.
  case confirmed(BluetoothAddress?, passkey: UInt32, automatically: Bool)
  /// A "just works" pairing was authorized.
  case authorized(BluetoothAddress?, automatically: Bool)
  /// A service connection was authorized.
  case serviceAuthorized(BluetoothAddress?, uuid: String, automatically: Bool)
  /// A passkey to show: the other device types it.
  case displayPasskey(BluetoothAddress?, passkey: UInt32, entered: UInt16)
  /// A PIN code to show.
  case displayPinCode(BluetoothAddress?, pinCode: String)
  /// A passkey or PIN code was typed and sent.
  case entered(BluetoothAddress?)
  /// A question was refused, with the reason.
  case refused(BluetoothAddress?, question: String, reason: String)
  /// bluetoothd cancelled the pending question.
  case canceled
  /// bluetoothd unregistered the agent by itself.
  case released
}

/// blekit's pairing agent: an `org.bluez.Agent1` object registered with bluetoothd.
///
/// Registered on the connection a command uses, it answers the pairings that connection starts
/// (`Device1.Pair`); registered as the default agent, it also answers pairings a remote central
/// starts with us. The capability decides the pairing method: `NoInputNoOutput` (the default)
/// gives "just works"; `DisplayYesNo` and `KeyboardDisplay` give numeric comparison or passkey
/// entry, answered by ``PairingConfirmation``. Only bluetoothd may call the agent.
public final class PairingAgent: Sendable {
  /// Where the agent is exported unless told otherwise.
  public static let defaultPath: ObjectPath = "/org/blekit/agent"

  /// The capability it was registered with.
  public let capability: AgentCapability
  /// Whether it is bluetoothd's default agent.
  public let isDefault: Bool
  private let registration: AgentRegistration
  private let callerCheck: BluetoothdCallerCheck
  private let ownsCallerCheck: Bool

  private init(
    capability: AgentCapability, isDefault: Bool, registration: AgentRegistration,
    callerCheck: BluetoothdCallerCheck, ownsCallerCheck: Bool
  ) {
    self.capability = capability
    self.isDefault = isDefault
    self.registration = registration
    self.callerCheck = callerCheck
    self.ownsCallerCheck = ownsCallerCheck
  }

  /// Exports and registers an agent on `connection`.
  ///
  /// - Parameters:
  ///   - asDefault: also make it bluetoothd's default agent (`RequestDefaultAgent`), so it
  ///     answers pairings that remote devices start.
  ///   - callerCheck: the check to guard the agent with; a new one is started when `nil`.
  ///   - events: called for every answer given, refusal, cancel and release.
  /// - Throws: bluetoothd's error (`AlreadyExists` when this connection has an agent already).
  public static func register(
    on connection: DBusConnection, capability: AgentCapability = .noInputNoOutput,
    confirmation: PairingConfirmation = .automatic, asDefault: Bool = false,
    path: ObjectPath = defaultPath, callerCheck: BluetoothdCallerCheck? = nil,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BlueZError) -> PairingAgent {
    let check: BluetoothdCallerCheck
    if let callerCheck {
      check = callerCheck
    } else {
      check = try await BluetoothdCallerCheck.start(on: connection)
    }
    let responder = PairingResponder(confirmation: confirmation, events: events)
    let agent = Agent1(
      answer: { request throws(AgentRefusal) in try await responder.answer(request) },
      cancel: { responder.cancelPending() },
      release: { events(.released) })
    let registration: AgentRegistration
    do {
      registration = try await AgentManager1(connection: connection).register(
        agent, at: path, capability: capability, asDefault: asDefault, callerCheck: check)
    } catch {
      if callerCheck == nil { check.stop() }
      throw error
    }
    return PairingAgent(
      capability: capability, isDefault: asDefault, registration: registration,
      callerCheck: check, ownsCallerCheck: callerCheck == nil)
  }

  /// Registers an agent on a central's bus connection (for ``CentralManager`` commands).
  public static func register(
    for central: CentralManager, capability: AgentCapability = .noInputNoOutput,
    confirmation: PairingConfirmation = .automatic, asDefault: Bool = false,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BlueZError) -> PairingAgent {
    try await register(
      on: central.objects.connection, capability: capability, confirmation: confirmation,
      asDefault: asDefault, events: events)
  }

  /// Registers an agent on a peripheral manager's bus connection, guarded by its caller check.
  public static func register(
    for peripheral: PeripheralManager, capability: AgentCapability = .noInputNoOutput,
    confirmation: PairingConfirmation = .automatic, asDefault: Bool = true,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BlueZError) -> PairingAgent {
    try await register(
      on: peripheral.connection, capability: capability, confirmation: confirmation,
      asDefault: asDefault, callerCheck: peripheral.callerCheck, events: events)
  }

  /// False once unregistered, or released by bluetoothd (e.g. when it restarted).
  public var isRegistered: Bool { registration.isRegistered }

  /// The object path the agent is exported at.
  public var path: ObjectPath { registration.path }

  /// Registers the agent again with a bluetoothd that restarted (a new bluetoothd knows no
  /// agents). The corresponding D-Bus members are `org.bluez.AgentManager1.RegisterAgent`
  /// and, for a default agent, `RequestDefaultAgent`.
  public func registerAgain() async throws(BlueZError) {
    try await registration.registerAgain()
  }

  /// Unregisters the agent and removes the exported object. Idempotent; errors (bluetoothd
  /// gone) are returned, not thrown, because there is nothing left to undo.
  ///
  /// Finishes even when the calling task is cancelled (Ctrl-C), waiting at most `limit` for
  /// bluetoothd (see `runCleanup(within:_:)`).
  @discardableResult
  public func unregister(within limit: Duration = defaultCleanupLimit) async -> BlueZError? {
    let failure = Mutex<BlueZError?>(nil)
    let finished = await runCleanup(within: limit) { [registration] in
      let error = await registration.unregister()
      failure.withLock { $0 = error }
    }
    if ownsCallerCheck { callerCheck.stop() }
    if !finished {
      return BlueZError(.timeout, "bluetoothd did not confirm unregistering the agent in \(limit)")
    }
    return failure.withLock { $0 }
  }
}

/// The policy behind a ``PairingAgent``: turns each question into an answer or a refusal.
final class PairingResponder: Sendable {
  let confirmation: PairingConfirmation
  let events: @Sendable (PairingAgentEvent) -> Void
  private let pending = Mutex<Task<AgentAnswer?, Never>?>(nil)

  init(
    confirmation: PairingConfirmation, events: @escaping @Sendable (PairingAgentEvent) -> Void
  ) {
    self.confirmation = confirmation
    self.events = events
  }

  /// The address in a Device1 path such as `/org/bluez/hci0/dev_00_AA_01_01_00_01`.
  static func address(of device: ObjectPath) -> BluetoothAddress? {
    device.rawValue.split(separator: "/").last.flatMap {
      BluetoothAddress(objectPathComponent: String($0))
    }
  }

  func answer(_ request: AgentRequest) async throws(AgentRefusal) -> AgentAnswer {
    let address = Self.address(of: request.device)
    // Displays need no answer: report them and accept, whatever the policy.
    switch request {
    case .displayPasskey(_, let passkey, let entered):
      events(.displayPasskey(address, passkey: passkey, entered: entered))
      return .accept
    case .displayPinCode(_, let pinCode):
      events(.displayPinCode(address, pinCode: pinCode))
      return .accept
    default:
      break
    }
    switch confirmation {
    case .automatic:
      return try automaticAnswer(request, address)
    case .prompt(let ask):
      let question = PairingQuestion(request: request, address: address)
      let task = Task { await ask(question) }
      pending.withLock { $0 = task }
      let answer = await task.value
      pending.withLock { $0 = nil }
      guard let answer, !task.isCancelled else {
        let reason = task.isCancelled ? "the question was cancelled" : "the user said no"
        events(.refused(address, question: request.member, reason: reason))
        throw task.isCancelled ? .canceled(reason) : .rejected(reason)
      }
      switch (request, answer) {
      case (.requestConfirmation(_, let passkey), _):
        events(.confirmed(address, passkey: passkey, automatically: false))
      case (.requestAuthorization, _):
        events(.authorized(address, automatically: false))
      case (.authorizeService(_, let uuid), _):
        events(.serviceAuthorized(address, uuid: uuid, automatically: false))
      default:
        events(.entered(address))
      }
      return answer
    }
  }

  private func automaticAnswer(_ request: AgentRequest, _ address: BluetoothAddress?)
    throws(AgentRefusal) -> AgentAnswer
  {
    switch request {
    case .requestConfirmation(_, let passkey):
      events(.confirmed(address, passkey: passkey, automatically: true))
      return .accept
    case .requestAuthorization:
      events(.authorized(address, automatically: true))
      return .accept
    case .authorizeService(_, let uuid):
      events(.serviceAuthorized(address, uuid: uuid, automatically: true))
      return .accept
    case .requestPasskey, .requestPinCode:
      let reason = "typing a passkey needs --confirm prompt on a terminal"
      events(.refused(address, question: request.member, reason: reason))
      throw .rejected(reason)
    case .displayPasskey, .displayPinCode:
      return .accept
    }
  }

  /// bluetoothd's `Cancel`: drop the pending prompt, if any.
  func cancelPending() {
    let task = pending.withLock { $0 }
    task?.cancel()
    events(.canceled)
  }
}
