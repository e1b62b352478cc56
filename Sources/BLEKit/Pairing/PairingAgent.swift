// PairingAgent: blekit's org.bluez.Agent1, answering pairing questions by a policy.
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// How a ``PairingAgent`` answers the questions that need a person.
public enum PairingConfirmation: Sendable {
  /// Authorize "just works" pairings (and the services in ``PairingPolicy/servedServices``)
  /// without asking; each decision is reported as a ``PairingAgentEvent``. Questions that need
  /// a person are refused: typed input (a passkey or PIN code shown on the other device) and
  /// passkey comparisons (`RequestConfirmation`), whose yes would have the kernel record the
  /// key as authenticated (MITM-protected) with nobody having compared the digits.
  case automatic
  /// Ask through this closure; it returns the answer, or `nil` to refuse. It is cancelled
  /// when bluetoothd cancels the question.
  case prompt(@Sendable (PairingQuestion) async -> PairingAnswer?)
}

/// Whom a ``PairingAgent`` pairs with, and how it answers.
///
/// The checks run in this order: a device outside ``allowedDevices`` is refused whatever it
/// asks; `AuthorizeService` for a service outside ``servedServices`` is refused; what is left
/// is answered by ``confirmation``.
public struct PairingPolicy: Sendable {
  /// Automatic answers or a person's.
  public var confirmation: PairingConfirmation
  /// The only devices whose questions are answered; `nil` for any device. A question whose
  /// device address cannot be read is refused when this is set.
  public var allowedDevices: Set<BluetoothAddress>?
  /// The services `AuthorizeService` may be granted for: the ones this host serves. Empty
  /// refuses every `AuthorizeService`.
  public var servedServices: Set<BluetoothUUID>

  public init(
    confirmation: PairingConfirmation, allowedDevices: Set<BluetoothAddress>? = nil,
    servedServices: Set<BluetoothUUID> = []
  ) {
    self.confirmation = confirmation
    self.allowedDevices = allowedDevices
    self.servedServices = servedServices
  }

  /// What the policy does with `question` before anyone is asked.
  public func decide(_ question: PairingQuestion) -> PairingDecision {
    if let allowedDevices {
      guard let address = question.address, allowedDevices.contains(address) else {
        return .refuse(.notAllowed)
      }
    }
    let byPolicy: PairingAcceptance = allowedDevices == nil ? .acceptsEveryDevice : .allowed
    switch question.request {
    case .displayPasskey, .displayPinCode:
      // Shown, not answered: the other side types it.
      return .accept(byPolicy)
    case .authorizeService(let uuid):
      guard let service = BluetoothUUID(rawValue: uuid), servedServices.contains(service) else {
        return .refuse(.serviceNotServed)
      }
    case .requestPasskey, .requestPinCode:
      if case .automatic = confirmation { return .refuse(.needsPerson) }
    case .requestConfirmation:
      // A numeric comparison: a yes tells the kernel that someone saw the same six digits on
      // both devices, and it records the key as authenticated (protected against a man in
      // the middle). Nobody looked at an automatic yes: refused. (A "just works" pairing
      // comes as RequestAuthorization and yields an unauthenticated key.)
      if case .automatic = confirmation { return .refuse(.comparisonNeedsPerson) }
    case .requestAuthorization:
      break
    }
    switch confirmation {
    case .automatic: return .accept(byPolicy)
    case .prompt: return .ask
    }
  }
}

/// What ``PairingPolicy/decide(_:)`` does with a question.
public enum PairingDecision: Sendable, Hashable {
  /// Accept without asking anyone.
  case accept(PairingAcceptance)
  /// Put the question to the person (``PairingConfirmation/prompt(_:)``).
  case ask
  /// Refuse, for this reason.
  case refuse(PairingRefusal)
}

/// Why a question was accepted.
public enum PairingAcceptance: Sendable, Hashable {
  /// ``PairingConfirmation/automatic`` with no allow list: every device is accepted.
  case acceptsEveryDevice
  /// The device is in ``PairingPolicy/allowedDevices``.
  case allowed
  /// The person said yes (or typed the code).
  case person
}

/// Why a question was refused.
public enum PairingRefusal: Sendable, Hashable {
  /// The device is not in ``PairingPolicy/allowedDevices``.
  case notAllowed
  /// `AuthorizeService` for a service not in ``PairingPolicy/servedServices``.
  case serviceNotServed
  /// Typed input (a passkey or PIN code) under ``PairingConfirmation/automatic``.
  case needsPerson
  /// A passkey comparison (`RequestConfirmation`) under ``PairingConfirmation/automatic``:
  /// confirming it would have the key recorded as authenticated with nobody having compared.
  case comparisonNeedsPerson
  /// The person said no, or gave no answer.
  case personSaidNo
  /// bluetoothd cancelled the question while the person was asked.
  case cancelled

  /// The reason as sent to bluetoothd in the error's message.
  public var description: String {
    switch self {
    case .notAllowed: "the device is not on the allow list"
    case .serviceNotServed: "the service is not one this host serves"
    case .needsPerson: "typing a passkey or PIN code needs a person to answer"
    case .comparisonNeedsPerson:
      "comparing passkeys needs a person: an automatic yes would have the key recorded as "
        + "protected against a man in the middle"
    case .personSaidNo: "the user said no"
    case .cancelled: "the question was cancelled"
    }
  }
}

/// A question for the person at this host.
public struct PairingQuestion: Sendable, Hashable {
  /// What bluetoothd asks.
  public var request: PairingRequest
  /// The other device's address, read from the device object's path.
  public var address: BluetoothAddress?

  public init(request: PairingRequest, address: BluetoothAddress?) {
    self.request = request
    self.address = address
  }

  /// A question as bluetoothd asked it.
  package init(request: AgentRequest, address: BluetoothAddress?) {
    self.init(request: PairingRequest(request), address: address)
  }
}

/// What the agent did, for the log (the CLI prints these on standard error, one line each).
public enum PairingAgentEvent: Sendable, Hashable {
  /// A question was accepted (a passkey confirmed, a pairing or service authorized, a code
  /// typed and sent), and why.
  case accepted(PairingQuestion, PairingAcceptance)
  /// A question was refused, and why.
  case refused(PairingQuestion, PairingRefusal)
  /// A passkey to show: the other device types it.
  case displayPasskey(BluetoothAddress?, passkey: UInt32, entered: UInt16)
  /// A PIN code to show.
  case displayPinCode(BluetoothAddress?, pinCode: String)
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
  package static let defaultPath: ObjectPath = "/org/blekit/agent"

  /// The capability it was registered with.
  public let capability: PairingCapability
  /// Whether it is bluetoothd's default agent.
  public let isDefault: Bool
  private let registration: AgentRegistration

  private init(capability: PairingCapability, isDefault: Bool, registration: AgentRegistration) {
    self.capability = capability
    self.isDefault = isDefault
    self.registration = registration
  }

  /// Exports and registers an agent on `connection`.
  ///
  /// - Parameters:
  ///   - connection: the system bus connection to export the agent on.
  ///   - capability: the input and output the agent declares to bluetoothd, which decides the
  ///     pairing method.
  ///   - policy: whom to pair with and how to answer (no default: accepting every device
  ///     must be asked for).
  ///   - asDefault: also make it bluetoothd's default agent (`RequestDefaultAgent`), so it
  ///     answers pairings that remote devices start.
  ///   - path: the object path the agent is exported at.
  ///   - callerCheck: the check to guard the agent with: the one of the object tree that
  ///     follows bluetoothd on `connection` (a manager's).
  ///   - events: called for every decision (accepted or refused, with the reason), display,
  ///     cancel and release.
  /// - Throws: bluetoothd's error (`AlreadyExists` when this connection has an agent already).
  package static func register(
    on connection: DBusConnection, capability: PairingCapability = .noInputNoOutput,
    policy: PairingPolicy, asDefault: Bool = false,
    path: ObjectPath = defaultPath, callerCheck: BluetoothdCallerCheck,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BlueZError) -> PairingAgent {
    let responder = PairingResponder(policy: policy, events: events)
    let agent = Agent1(
      answer: { request throws(AgentRefusal) in try await responder.answer(request) },
      cancel: { responder.cancelPending() },
      release: { events(.released) })
    let registration = try await AgentManager1(connection: connection).register(
      agent, at: path, capability: capability.agentCapability, asDefault: asDefault,
      callerCheck: callerCheck)
    return PairingAgent(capability: capability, isDefault: asDefault, registration: registration)
  }

  /// Registers an agent on a central's bus connection (for ``CentralManager`` commands),
  /// guarded by the central's follower of bluetoothd.
  ///
  /// - Throws: bluetoothd's error (code ``BluetoothError/Code/bluez`` with
  ///   ``BluetoothError/underlyingName`` `org.bluez.Error.AlreadyExists` when this manager has an
  ///   agent already).
  public static func register(
    for central: CentralManager, capability: PairingCapability = .noInputNoOutput,
    policy: PairingPolicy, asDefault: Bool = false,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BluetoothError) -> PairingAgent {
    do {
      return try await register(
        on: central.objects.connection, capability: capability, policy: policy,
        asDefault: asDefault, callerCheck: BluetoothdCallerCheck(following: central.objects),
        events: events)
    } catch {
      throw BluetoothError(error)
    }
  }

  /// Registers an agent on a peripheral manager's bus connection, guarded by its caller check.
  public static func register(
    for peripheral: PeripheralManager, capability: PairingCapability = .noInputNoOutput,
    policy: PairingPolicy, asDefault: Bool = true,
    events: @escaping @Sendable (PairingAgentEvent) -> Void = { _ in }
  ) async throws(BluetoothError) -> PairingAgent {
    do {
      return try await register(
        on: peripheral.connection, capability: capability, policy: policy,
        asDefault: asDefault, callerCheck: peripheral.callerCheck, events: events)
    } catch {
      throw BluetoothError(error)
    }
  }

  /// False once unregistered, or released by bluetoothd (e.g. when it restarted).
  public var isRegistered: Bool { registration.isRegistered }

  /// The object path the agent is exported at.
  package var path: ObjectPath { registration.path }

  /// Registers the agent again with a bluetoothd that restarted (a new bluetoothd knows no
  /// agents). The corresponding D-Bus members are `org.bluez.AgentManager1.RegisterAgent`
  /// and, for a default agent, `RequestDefaultAgent`.
  public func registerAgain() async throws(BluetoothError) {
    do {
      try await registration.registerAgain()
    } catch {
      throw BluetoothError(error)
    }
  }

  /// Unregisters the agent and removes the exported object. Idempotent; errors (bluetoothd
  /// gone) are returned, not thrown, because there is nothing left to undo.
  ///
  /// Finishes even when the calling task is cancelled (Ctrl-C), waiting at most `limit` for
  /// bluetoothd (see `runCleanup(within:_:)`).
  @discardableResult
  public func unregister(within limit: Duration = defaultCleanupLimit) async -> BluetoothError? {
    let failure = Mutex<BlueZError?>(nil)
    let finished = await runCleanup(within: limit) { [registration] in
      let error = await registration.unregister()
      failure.withLock { $0 = error }
    }
    if !finished {
      return BluetoothError(
        .timeout, "bluetoothd did not confirm unregistering the agent in \(limit)")
    }
    return failure.withLock { $0 }.map { BluetoothError($0, while: "unregistering the agent") }
  }
}

/// The policy behind a ``PairingAgent``: turns each question into an answer or a refusal.
final class PairingResponder: Sendable {
  let policy: PairingPolicy
  let events: @Sendable (PairingAgentEvent) -> Void
  private let pending = Mutex<Task<PairingAnswer?, Never>?>(nil)

  init(policy: PairingPolicy, events: @escaping @Sendable (PairingAgentEvent) -> Void) {
    self.policy = policy
    self.events = events
  }

  /// The address in a Device1 path such as `/org/bluez/hci0/dev_00_AA_01_01_00_01`.
  static func address(of device: ObjectPath) -> BluetoothAddress? {
    BluetoothAddress(objectPathComponent: device.lastComponent)
  }

  func answer(_ request: AgentRequest) async throws(AgentRefusal) -> AgentAnswer {
    let question = PairingQuestion(request: request, address: Self.address(of: request.device))
    switch policy.decide(question) {
    case .refuse(let why):
      events(.refused(question, why))
      throw .rejected(why.description)
    case .accept(let why):
      switch request {
      case .displayPasskey(_, let passkey, let entered):
        events(.displayPasskey(question.address, passkey: passkey, entered: entered))
      case .displayPinCode(_, let pinCode):
        events(.displayPinCode(question.address, pinCode: pinCode))
      default:
        events(.accepted(question, why))
      }
      return .accept
    case .ask:
      guard case .prompt(let ask) = policy.confirmation else {
        // decide(_:) asks only under .prompt.
        events(.refused(question, .needsPerson))
        throw .rejected(PairingRefusal.needsPerson.description)
      }
      let task = Task { await ask(question) }
      pending.withLock { $0 = task }
      let answer = await task.value
      pending.withLock { $0 = nil }
      guard let answer, !task.isCancelled else {
        let why: PairingRefusal = task.isCancelled ? .cancelled : .personSaidNo
        events(.refused(question, why))
        throw task.isCancelled ? .canceled(why.description) : .rejected(why.description)
      }
      events(.accepted(question, .person))
      return answer.agentAnswer
    }
  }

  /// bluetoothd's `Cancel`: drop the pending prompt, if any.
  func cancelPending() {
    let task = pending.withLock { $0 }
    task?.cancel()
    events(.canceled)
  }
}
