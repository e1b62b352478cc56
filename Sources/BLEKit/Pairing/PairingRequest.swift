// PairingRequest, PairingAnswer, PairingCapability: what bluetoothd asks blekit's pairing
// agent, what the agent answers, and what it declares it can show and take in.
import BlueZ

/// One question bluetoothd asks a ``PairingAgent`` (BlueZ's `doc/org.bluez.Agent.rst`); the
/// device it is about is ``PairingQuestion/address``.
public enum PairingRequest: Sendable, Hashable {
  /// A legacy PIN code (1-16 characters) is wanted.
  case requestPinCode
  /// Show this PIN code until the question is cancelled.
  case displayPinCode(String)
  /// A passkey (0...999999) shown on the other device is wanted.
  case requestPasskey
  /// Show this passkey; `entered` keys were typed on the other side.
  case displayPasskey(UInt32, entered: UInt16)
  /// Does the other device show the same passkey?
  case requestConfirmation(passkey: UInt32)
  /// Allow an incoming "just works" pairing?
  case requestAuthorization
  /// Allow a connection to this service (its UUID as bluetoothd gives it)?
  case authorizeService(uuid: String)

  /// The name of the `org.bluez.Agent1` method that asked, e.g. `RequestConfirmation`.
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

  package init(_ request: AgentRequest) {
    switch request {
    case .requestPinCode: self = .requestPinCode
    case .displayPinCode(_, let pinCode): self = .displayPinCode(pinCode)
    case .requestPasskey: self = .requestPasskey
    case .displayPasskey(_, let passkey, let entered):
      self = .displayPasskey(passkey, entered: entered)
    case .requestConfirmation(_, let passkey): self = .requestConfirmation(passkey: passkey)
    case .requestAuthorization: self = .requestAuthorization
    case .authorizeService(_, let uuid): self = .authorizeService(uuid: uuid)
    }
  }
}

/// What a ``PairingConfirmation/prompt(_:)`` closure answers to a ``PairingQuestion``.
public enum PairingAnswer: Sendable, Hashable {
  /// Yes (a confirmation or authorization).
  case accept
  /// The PIN code typed for ``PairingRequest/requestPinCode``.
  case pinCode(String)
  /// The passkey typed for ``PairingRequest/requestPasskey``.
  case passkey(UInt32)

  package var agentAnswer: AgentAnswer {
    switch self {
    case .accept: .accept
    case .pinCode(let code): .pinCode(code)
    case .passkey(let passkey): .passkey(passkey)
    }
  }
}

/// What a ``PairingAgent`` declares it can show and take in; bluetoothd picks the pairing
/// method from it. The raw values are BlueZ's names.
public enum PairingCapability: String, Sendable, Hashable, CaseIterable {
  /// Can show a passkey, cannot take input.
  case displayOnly = "DisplayOnly"
  /// Can show a passkey and take a yes or no (numeric comparison).
  case displayYesNo = "DisplayYesNo"
  /// Can take a passkey, cannot show one.
  case keyboardOnly = "KeyboardOnly"
  /// Neither shows nor takes anything: "just works" pairing, no MITM protection.
  case noInputNoOutput = "NoInputNoOutput"
  /// Can show a passkey and take one.
  case keyboardDisplay = "KeyboardDisplay"

  package var agentCapability: AgentCapability {
    switch self {
    case .displayOnly: .displayOnly
    case .displayYesNo: .displayYesNo
    case .keyboardOnly: .keyboardOnly
    case .noInputNoOutput: .noInputNoOutput
    case .keyboardDisplay: .keyboardDisplay
    }
  }
}
