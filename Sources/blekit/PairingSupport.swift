// Shared by pair and advertise --pairable: the agent options, the terminal prompt, the log.

import ArgumentParsing
import BLEKit
import BlueZ
import Bluetooth

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
  let capability: AgentCapability

  init(_ capability: AgentCapability) { self.capability = capability }

  init(argument: String) throws(ArgumentValueError) {
    guard
      let match = AgentCapability.allCases.first(where: {
        $0.rawValue.lowercased() == argument.lowercased()
      })
    else {
      throw ArgumentValueError(
        "expected one of " + AgentCapability.allCases.map(\.rawValue).joined(separator: ", "))
    }
    capability = match
  }

  var argumentDescription: String { capability.rawValue }
  static var argumentChoices: [String]? { AgentCapability.allCases.map(\.rawValue) }
}

/// Whether a person can answer questions here: standard input and standard error are both
/// terminals.
var canPrompt: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDERR_FILENO) == 1 }

/// The agent's policy for `--confirm`: `prompt` asks on the terminal; `auto` confirms by
/// itself. Without `--confirm`, a terminal gets `prompt` and a script gets `auto`.
/// - Throws: a usage error for `--confirm prompt` without a terminal.
func pairingConfirmation(_ policy: ConfirmPolicy?) throws(UsageError) -> PairingConfirmation {
  switch policy ?? (canPrompt ? .prompt : .auto) {
  case .auto:
    return .automatic
  case .prompt:
    guard canPrompt else {
      throw .invalid("--confirm prompt needs a terminal on standard input and standard error")
    }
    return .prompt { question in await askOnTerminal(question) }
  }
}

/// Prints what the agent did on standard error, one line each.
func logPairingEvent(_ event: PairingAgentEvent) {
  if let line = describePairingEvent(event) { writeStandardError("blekit: \(line)\n") }
}

/// The log line for an agent event.
func describePairingEvent(_ event: PairingAgentEvent) -> String? {
  func who(_ address: BluetoothAddress?) -> String { address?.rawValue ?? "a device" }
  switch event {
  case .confirmed(let address, let passkey, let automatically):
    return "confirmed passkey \(sixDigits(passkey)) with \(who(address))"
      + (automatically ? " (--confirm auto)" : "")
  case .authorized(let address, let automatically):
    return "accepted pairing with \(who(address))" + (automatically ? " (--confirm auto)" : "")
  case .serviceAuthorized(let address, let uuid, let automatically):
    return "authorized service \(uuid) for \(who(address))"
      + (automatically ? " (--confirm auto)" : "")
  case .displayPasskey(let address, let passkey, let entered):
    return "passkey for \(who(address)): \(sixDigits(passkey))"
      + (entered > 0 ? " (\(entered) digits typed)" : "")
  case .displayPinCode(let address, let pinCode):
    return "PIN code for \(who(address)): \(pinCode)"
  case .entered(let address):
    return "sent the code for \(who(address))"
  case .refused(let address, let question, let reason):
    return "refused \(question) from \(who(address)): \(reason)"
  case .canceled:
    return "bluetoothd cancelled the pairing question"
  case .released:
    return "bluetoothd released the pairing agent"
  }
}

/// A passkey as BlueZ asks it to be shown: six digits, zero-padded.
func sixDigits(_ passkey: UInt32) -> String {
  let text = String(passkey)
  return String(repeating: "0", count: max(0, 6 - text.count)) + text
}

/// Asks the question on the terminal; `nil` means no (or no answer).
private func askOnTerminal(_ question: PairingQuestion) async -> AgentAnswer? {
  let who = question.address?.rawValue ?? "a device"
  switch question.request {
  case .requestConfirmation(_, let passkey):
    let answer = await readTerminalLine(
      "Does \(who) show passkey \(sixDigits(passkey))? [y/N] ")
    return isYes(answer) ? .accept : nil
  case .requestAuthorization:
    let answer = await readTerminalLine("Accept pairing with \(who)? [y/N] ")
    return isYes(answer) ? .accept : nil
  case .authorizeService(_, let uuid):
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
  let reader = Task.detached { () -> String? in
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while !Task.isCancelled {
      var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
      // Wake up now and then to notice cancellation; a terminal has no other way to.
      let ready = poll(&descriptor, 1, 200)
      if ready < 0 && errno == EINTR { continue }
      guard ready >= 0 else { return nil }
      if ready == 0 { continue }
      let count = read(STDIN_FILENO, &byte, 1)
      if count < 0 && errno == EINTR { continue }
      guard count == 1 else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
      if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
      line.append(byte)
    }
    return nil
  }
  let answer = await withTaskCancellationHandler {
    await reader.value
  } onCancel: {
    reader.cancel()
  }
  if answer == nil { writeStandardError("\n") }
  return answer
}

/// For `advertise --pairable`: registers blekit's agent as bluetoothd's default agent on the
/// peripheral's connection (so it answers pairings a central starts) and says so on standard
/// error. `--confirm` works as for `pair`.
func registerPairableAgent(
  _ manager: PeripheralManager, capability: AgentCapability = .noInputNoOutput,
  confirm: ConfirmPolicy? = nil
) async throws -> PairingAgent {
  let confirmation: PairingConfirmation
  do {
    confirmation = try pairingConfirmation(confirm)
  } catch {
    throw CLIError(.usage, error.message)
  }
  do {
    let agent = try await PairingAgent.register(
      for: manager, capability: capability, confirmation: confirmation, asDefault: true,
      events: logPairingEvent)
    writeStandardError(
      "blekit: pairing agent registered on \(manager.adapterName) (\(capability.rawValue), "
        + "default agent)\n")
    return agent
  } catch {
    throw CLIError(.remoteError, "registering the pairing agent: \(error)")
  }
}
