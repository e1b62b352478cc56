// `blekit pair ADDRESS|NAME`: pair (and bond) with a device through blekit's own agent.

import ArgumentParsing
import BLEKit
import Synchronization

/// Pairs with a device, answering bluetoothd's questions by the `--confirm` policy.
struct PairCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "pair",
    abstract: "Pair and bond with a device, by address or advertised name.",
    discussion: """
      Registers blekit's pairing agent with --capability (NoInputNoOutput by default: \
      "just works"; DisplayYesNo or KeyboardDisplay for numeric comparison or passkey \
      entry), finds the device (scanning for it when bluetoothd does not know it yet) and \
      asks bluetoothd to pair. With --confirm prompt, passkeys are confirmed (or typed) on \
      the terminal; --confirm auto accepts "just works" by itself and refuses what needs a \
      person (a passkey to type, or a comparison: a yes nobody checked would have the key \
      recorded as protected against a man in the middle). Either \
      way the agent answers only about the device named (others are refused) and grants no \
      AuthorizeService, and each decision is logged on standard error. Without --confirm, a \
      terminal prompts; without a terminal --confirm is required (exit 2 otherwise). A \
      device already paired is left as it is. Prints one \
      line with the Paired, Bonded and Trusted state. If the device was not connected \
      before, it is disconnected afterwards (the keys stay). Ctrl-C cancels the pairing.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let adapter: Option<String> = .adapter()
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(60),
      help: "Give up finding the device, then pairing, after this long each.")
    let capability = DefaultedOption<CapabilityArgument>(
      "--capability", value: "CAP", default: CapabilityArgument(.noInputNoOutput),
      help: "What the agent can show and take in (BlueZ's names).")
    let confirm = Option<ConfirmPolicy>(
      "--confirm", value: "POLICY",
      help: "auto: confirm by itself; prompt: ask (default on a terminal; required without).")
    let trust = Flag("--trust", help: "Also mark the device trusted.")
  }

  let device: PeripheralTarget
  let adapter: String?
  let timeout: Duration
  let capability: PairingCapability
  let confirmation: PairingConfirmation
  let trust: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    device = try parsePeripheralTarget(arguments.device)
    adapter = arguments.adapter
    guard arguments.timeout > .zero else { throw .invalid("--timeout must be more than 0 seconds") }
    timeout = arguments.timeout
    capability = arguments.capability.capability
    confirmation =
      try pairingPolicy(
        confirm: arguments.confirm, allowed: nil, served: [],
        missing: "pair without a terminal needs --confirm auto (it then confirms by itself, "
          + "for the device named only)"
      ).confirmation
    trust = arguments.trust
  }

  func run() async throws {
    // Finding and pairing take at most --timeout each; cleanup a few seconds.
    let limit = timeout * 2 + .seconds(60)
    let watchdog = HangWatchdog(
      after: limit, status: .timedOut,
      message: "pair is still running after \(limit.components.seconds) s, past all of its time "
        + "limits (a blekit bug: please report it); exiting")
    defer { watchdog.disarm() }
    watchdog.phase = "opening the central"
    let manager = try await openPoweredCentral(adapter: adapter)
    let agent = AgentSlot()
    do {
      try await pair(manager, agent: agent, watchdog: watchdog)
    } catch {
      watchdog.phase = "cleaning up after: \(error)"
      await agent.unregister()
      await manager.close()
      throw exitError(error)
    }
    watchdog.phase = "unregistering the agent and closing"
    await agent.unregister()
    await manager.close()
  }

  private func pair(_ manager: CentralManager, agent: AgentSlot, watchdog: HangWatchdog)
    async throws
  {
    watchdog.phase = "finding \(device)"
    let peripheral = try await manager.find(device, timeout: timeout)
    watchdog.phase = "registering the pairing agent"
    // Registered once the address is known: the agent answers about this device only.
    let policy = PairingPolicy(
      confirmation: confirmation, allowedDevices: [peripheral.address], servedServices: [])
    do {
      agent.set(
        try await PairingAgent.register(
          for: manager, capability: capability, policy: policy, events: logPairingEvent))
    } catch {
      throw CLIError(.remoteError, "registering the pairing agent: \(error)")
    }
    watchdog.phase = "pairing with \(peripheral.address)"
    let before = try await manager.pairingState(of: peripheral)
    let (state, newlyPaired) = try await manager.pair(peripheral, timeout: timeout)
    if trust && !state.trusted { try await manager.setTrusted(true, for: peripheral) }
    if newlyPaired && !before.connected { await manager.disconnectQuietly(peripheral) }
    let after = try await manager.pairingState(of: peripheral)
    guard after.paired else {
      throw CLIError(.failure, "bluetoothd reports \(peripheral) as not paired after pairing")
    }
    printLine(
      "\(newlyPaired ? "paired with" : "already paired with") \(peripheral.address): "
        + Self.describe(after))
  }

  /// `paired yes, bonded yes, trusted no`.
  static func describe(_ state: PairingState) -> String {
    func yes(_ value: Bool) -> String { value ? "yes" : "no" }
    return "paired \(yes(state.paired)), bonded \(state.bonded.map(yes) ?? "unknown"), "
      + "trusted \(yes(state.trusted))"
  }
}

/// The agent `pair` registers once it found the device, to unregister on every exit path.
private final class AgentSlot: Sendable {
  private let agent = Mutex<PairingAgent?>(nil)
  func set(_ registered: PairingAgent) { agent.withLock { $0 = registered } }
  func unregister() async {
    guard let registered = agent.withLock({ $0 }) else { return }
    await registered.unregister()
  }
}
