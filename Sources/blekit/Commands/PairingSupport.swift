// Shared by pair and advertise --pairable: the agent options, the terminal prompt, the log.

import ArgumentParsing
import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

/// `--confirm auto|prompt`.
enum ConfirmPolicy: String, ExpressibleByArgument, CaseIterable {
  case auto
  case prompt

  init(argument: String) throws(ArgumentValueError) {
    guard let policy = ConfirmPolicy(rawValue: argument) else {
      throw ArgumentValueError("expected auto or prompt")
    }
    self = policy
  }

  static var argumentChoices: [String]? { allCases.map(\.rawValue) }
}

/// `--capability NAME`, BlueZ's agent capability names, any case.
struct CapabilityArgument: ExpressibleByArgument {
  let capability: PairingCapability

  init(_ capability: PairingCapability) { self.capability = capability }

  init(argument: String) throws(ArgumentValueError) {
    guard
      let match = PairingCapability.allCases.first(where: {
        $0.rawValue.lowercased() == argument.lowercased()
      })
    else {
      throw ArgumentValueError(
        "expected one of " + PairingCapability.allCases.map(\.rawValue).joined(separator: ", "))
    }
    capability = match
  }

  var argumentDescription: String { capability.rawValue }
  static var argumentChoices: [String]? { PairingCapability.allCases.map(\.rawValue) }
}

/// Whether a person can answer questions here: standard input and standard error are both
/// terminals.
var canPrompt: Bool { Syscall.isatty(STDIN_FILENO) == 1 && Syscall.isatty(STDERR_FILENO) == 1 }

/// The agent's policy from `--confirm` and the devices named on the command line.
///
/// - `--confirm prompt`: ask on the terminal (a usage error without one).
/// - `--confirm auto`: answer by itself: every device, or only `allowed` when given.
/// - no `--confirm` with `allowed`: answer by itself for those devices only.
/// - neither: a terminal prompts; without a terminal nothing is accepted silently, so this is
///   a usage error saying what to pass (`missing`).
/// Devices outside `allowed` (when given) are refused before anyone is asked, and
/// `AuthorizeService` is granted only for `served`.
/// - Throws: a usage error as above.
func pairingPolicy(
  confirm: ConfirmPolicy?, allowed: Set<BluetoothAddress>?, served: Set<BluetoothUUID>,
  missing: String, terminal: Bool = canPrompt
) throws(UsageError) -> PairingPolicy {
  let confirmation: PairingConfirmation
  switch confirm ?? (allowed != nil ? .auto : terminal ? .prompt : nil) {
  case .auto:
    confirmation = .automatic
  case .prompt:
    guard terminal else {
      throw .invalid("--confirm prompt needs a terminal on standard input and standard error")
    }
    confirmation = .prompt { question in await askOnTerminal(question) }
  case nil:
    throw .invalid(missing)
  }
  return PairingPolicy(
    confirmation: confirmation, allowedDevices: allowed, servedServices: served)
}

/// Parses `--allow ADDRESS` values; `nil` when none were given.
func allowedDevices(_ values: [String]) throws(UsageError) -> Set<BluetoothAddress>? {
  guard !values.isEmpty else { return nil }
  var addresses: Set<BluetoothAddress> = []
  for value in values {
    guard let address = BluetoothAddress(rawValue: value) else {
      throw .invalid("--allow: '\(value)' is not a Bluetooth address (XX:XX:XX:XX:XX:XX)")
    }
    addresses.insert(address)
  }
  return addresses
}

/// Prints the agent's decisions on standard error, one line each.
func logPairingEvent(_ event: PairingAgentEvent) {
  if let line = describePairingEvent(event) { writeStandardError("blekit: \(line)\n") }
}

/// The log line for an agent event: what was asked, by which device, the decision and why.
func describePairingEvent(_ event: PairingAgentEvent) -> String? {
  func who(_ address: BluetoothAddress?) -> String { address?.rawValue ?? "an unknown device" }
  switch event {
  case .accepted(let question, let why):
    let reason =
      switch why {
      case .acceptsEveryDevice: "--confirm auto accepts every device"
      case .allowed: "named on the command line"
      case .person: "answered on the terminal"
      }
    return
      "pairing: accepted \(describe(question.request)) from \(who(question.address)): \(reason)"
  case .refused(let question, let why):
    let reason =
      switch why {
      case .notAllowed: "not a device named on the command line"
      case .serviceNotServed: "not a service blekit serves"
      case .needsPerson: "typing a passkey or PIN code needs --confirm prompt on a terminal"
      case .comparisonNeedsPerson:
        "comparing passkeys needs --confirm prompt on a terminal (an automatic yes would have "
          + "the key recorded as protected against a man in the middle)"
      case .personSaidNo: "the user said no"
      case .cancelled: "the question was cancelled"
      }
    return "pairing: refused \(describe(question.request)) from \(who(question.address)): \(reason)"
  case .displayPasskey(let address, let passkey, let entered):
    return "passkey for \(who(address)): \(sixDigits(passkey))"
      + (entered > 0 ? " (\(entered) digits typed)" : "")
  case .displayPinCode(let address, let pinCode):
    return "PIN code for \(who(address)): \(pinCode)"
  case .canceled:
    return "bluetoothd cancelled the pairing question"
  case .released:
    return "bluetoothd released the pairing agent"
  }
}

/// A request for the log: its D-Bus member and what it carries.
private func describe(_ request: PairingRequest) -> String {
  switch request {
  case .requestConfirmation(let passkey):
    "RequestConfirmation (passkey \(sixDigits(passkey)))"
  case .requestAuthorization: "RequestAuthorization (pairing)"
  case .authorizeService(let uuid): "AuthorizeService (service \(uuid))"
  case .requestPasskey: "RequestPasskey"
  case .requestPinCode: "RequestPinCode"
  case .displayPasskey: "DisplayPasskey"
  case .displayPinCode: "DisplayPinCode"
  }
}

/// A passkey as BlueZ asks it to be shown: six digits, zero-padded.
func sixDigits(_ passkey: UInt32) -> String {
  let text = String(passkey)
  return String(repeating: "0", count: max(0, 6 - text.count)) + text
}

/// Asks the question on the terminal; `nil` means no (or no answer).
private func askOnTerminal(_ question: PairingQuestion) async -> PairingAnswer? {
  let who = question.address?.rawValue ?? "a device"
  switch question.request {
  case .requestConfirmation(let passkey):
    let answer = await readTerminalLine(
      "Does \(who) show passkey \(sixDigits(passkey))? [y/N] ")
    return isYes(answer) ? .accept : nil
  case .requestAuthorization:
    let answer = await readTerminalLine("Accept pairing with \(who)? [y/N] ")
    return isYes(answer) ? .accept : nil
  case .authorizeService(let uuid):
    let answer = await readTerminalLine("Allow \(who) to use service \(uuid)? [y/N] ")
    return isYes(answer) ? .accept : nil
  case .requestPasskey:
    guard let text = await readTerminalLine("Passkey shown on \(who): "),
      let passkey = UInt32(text.trimmingSpaces), passkey <= 999_999
    else { return nil }
    return .passkey(passkey)
  case .requestPinCode:
    guard let text = await readTerminalLine("PIN code for \(who): ")?.trimmingSpaces,
      (1...16).contains(text.count)
    else { return nil }
    return .pinCode(text)
  case .displayPasskey, .displayPinCode:
    return .accept
  }
}

private func isYes(_ answer: String?) -> Bool {
  guard let answer = answer?.trimmingSpaces.lowercased() else { return false }
  return answer == "y" || answer == "yes"
}

extension String {
  fileprivate var trimmingSpaces: String {
    String(
      self.drop(while: { $0 == " " || $0 == "\t" }).reversed()
        .drop(while: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).reversed())
  }
}

/// Shows `prompt` on standard error and reads one line from standard input. Returns `nil` on
/// end of input or when the task is cancelled (bluetoothd's `Cancel`, Ctrl-C).
private func readTerminalLine(_ prompt: String) async -> String? {
  writeStandardError(prompt)
  let answer = await readLine(from: STDIN_FILENO)
  if answer == nil { writeStandardError("\n") }
  return answer
}

/// One line from `fd` (without its newline), read a byte at a time so that nothing after the
/// line is taken from a terminal's next answer; what came before the end of input when it
/// ends the line; `nil` at the end of input, on an error, or when the task is cancelled.
///
/// Waits on BLEKit's reactor for `fd` to become readable, then reads: no thread is held while
/// the person thinks, and a cancellation ends the wait at once. `fd` stays as it is (standard
/// input is shared with the shell: it is not made non-blocking); a read follows a readiness.
func readLine(from fd: Int32) async -> String? {
  var line: [UInt8] = []
  var byte: UInt8 = 0
  while true {
    guard (try? await Reactor.shared.wait(fd, for: .readable)) == .ready else { return nil }
    let count = Syscall.read(fd, &byte, 1)
    if count < 0 && errno == EINTR { continue }
    guard count == 1 else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
    if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
    line.append(byte)
  }
}

/// For `advertise --pairable`: registers blekit's agent as bluetoothd's default agent on the
/// peripheral's connection (so it answers pairings a central starts) and says so on standard
/// error.
///
/// The capability is `NoInputNoOutput` when every device is accepted ("just works"), else
/// `DisplayYesNo`: Linux completes an incoming "just works" pairing without asking the agent
/// when the local capability is `NoInputNoOutput`, so an allow list or a prompt would never be
/// consulted. With `DisplayYesNo` a central that asks for MITM protection and has a display
/// gets a passkey comparison: the terminal's person answers it (`--confirm prompt`), and an
/// automatic policy (`--allow` alone) refuses it (``PairingRefusal/comparisonNeedsPerson``), so
/// no key is recorded as authenticated without a person having compared; a "just works"
/// pairing (`RequestAuthorization`) is accepted for an allowed device and yields an
/// unauthenticated key.
func registerPairableAgent(_ manager: PeripheralManager, policy: PairingPolicy) async throws
  -> PairingAgent
{
  let acceptsEveryone: Bool
  if case .automatic = policy.confirmation, policy.allowedDevices == nil {
    acceptsEveryone = true
  } else {
    acceptsEveryone = false
  }
  let capability: PairingCapability = acceptsEveryone ? .noInputNoOutput : .displayYesNo
  do {
    let agent = try await PairingAgent.register(
      for: manager, capability: capability, policy: policy, asDefault: true,
      events: logPairingEvent)
    writeStandardError(
      "blekit: pairing agent registered on \(manager.adapterName) (\(capability.rawValue), "
        + "default agent; \(describe(policy)))\n")
    return agent
  } catch {
    throw CLIError(.remoteError, "registering the pairing agent: \(error)")
  }
}

/// The policy in a few words for the log: `accepting any device`, `accepting only
/// 00:AA:01:00:00:00`, `asking on the terminal`.
func describe(_ policy: PairingPolicy) -> String {
  let who =
    policy.allowedDevices.map { devices in
      "only " + devices.map(\.rawValue).sorted().joined(separator: ", ")
    } ?? "any device"
  switch policy.confirmation {
  case .automatic: return "accepting \(who)"
  case .prompt: return "asking on the terminal about \(who)"
  }
}
