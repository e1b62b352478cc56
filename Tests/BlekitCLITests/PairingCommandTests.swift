// pair, unpair and trust: argument checks, and the agent's log lines.

import ArgumentParsing
import BLEKit
import BlueZ
import Bluetooth
import DBus
import Testing

@testable import blekit

@Suite struct PairingCommandTests {
  @Test func pairTakesAnAddressOrAName() throws {
    let byAddress = try PairCommand.parse(["00:AA:01:01:00:42", "--confirm", "auto"])
    #expect(byAddress.device == .address(BluetoothAddress(rawValue: "00:AA:01:01:00:42")!))
    #expect(byAddress.capability == .noInputNoOutput)
    #expect(byAddress.timeout == .seconds(60))
    #expect(!byAddress.trust)
    guard case .automatic = byAddress.confirmation else {
      Issue.record("--confirm auto should confirm automatically")
      return
    }
    let byName = try PairCommand.parse(["blekit-pair-b", "--confirm", "auto", "--trust"])
    #expect(byName.device == .name("blekit-pair-b"))
    #expect(byName.trust)
  }

  @Test func capabilityNamesAreBlueZsInAnyCase() throws {
    let command = try PairCommand.parse(
      ["00:AA:01:01:00:42", "--capability", "displayyesno", "--confirm", "auto"])
    #expect(command.capability == .displayYesNo)
    let keyboard = try PairCommand.parse(
      ["00:AA:01:01:00:42", "--capability", "KeyboardDisplay", "--confirm", "auto"])
    #expect(keyboard.capability == .keyboardDisplay)
    #expect(throws: UsageError.self) {
      try PairCommand.parse(["00:AA:01:01:00:42", "--capability", "Telepathy"])
    }
    #expect(throws: UsageError.self) {
      try PairCommand.parse(["00:AA:01:01:00:42", "--confirm", "maybe"])
    }
  }

  @Test func badValuesAreUsageErrors() {
    #expect(throws: UsageError.self) {
      try PairCommand.parse(["00:AA:01:01:00:42", "--timeout", "0", "--confirm", "auto"])
    }
    #expect(throws: UsageError.self) { try PairCommand.parse(["00:AA:01:01:00"]) }
    #expect(throws: UsageError.self) { try UnpairCommand.parse(["not-an-address"]) }
    #expect(throws: UsageError.self) { try TrustCommand.parse(["blekit-pair-b"]) }
  }

  @Test func promptNeedsATerminal() throws {
    // Only checkable where the test runs without a terminal (CI, scripts/test piping).
    guard !canPrompt else { return }
    #expect(throws: UsageError.self) {
      try PairCommand.parse(["00:AA:01:01:00:42", "--confirm", "prompt"])
    }
    // Without --confirm, a script is not answered automatically: it must say so.
    let missing = #expect(throws: UsageError.self) {
      try PairCommand.parse(["00:AA:01:01:00:42"])
    }
    #expect(missing?.message.contains("--confirm auto") == true)
  }

  /// The policy from --confirm and --allow, on a terminal and without one.
  @Test func policyFromTheCommandLine() throws {
    let served: Set<BluetoothUUID> = [BlekitUUID.transferService]
    let a = BluetoothAddress(rawValue: "00:AA:01:00:00:00")!
    func policy(_ confirm: ConfirmPolicy?, _ allowed: Set<BluetoothAddress>?, terminal: Bool)
      throws(UsageError) -> PairingPolicy
    {
      try pairingPolicy(
        confirm: confirm, allowed: allowed, served: served, missing: "say which",
        terminal: terminal)
    }
    // No terminal: nothing given is an error; --confirm auto or --allow is automatic.
    let missing = #expect(throws: UsageError.self) { try policy(nil, nil, terminal: false) }
    #expect(missing?.message == "say which")
    #expect(throws: UsageError.self) { try policy(.prompt, nil, terminal: false) }
    let auto = try policy(.auto, nil, terminal: false)
    guard case .automatic = auto.confirmation else {
      Issue.record("--confirm auto should be automatic")
      return
    }
    #expect(auto.allowedDevices == nil)
    #expect(auto.servedServices == served)
    let allowOnly = try policy(nil, [a], terminal: false)
    guard case .automatic = allowOnly.confirmation else {
      Issue.record("--allow alone should be automatic for the devices named")
      return
    }
    #expect(allowOnly.allowedDevices == [a])
    // A terminal: the default is to ask; --allow alone still answers by itself.
    guard case .prompt = try policy(nil, nil, terminal: true).confirmation else {
      Issue.record("on a terminal the default should be prompt")
      return
    }
    guard case .automatic = try policy(nil, [a], terminal: true).confirmation else {
      Issue.record("--allow alone should be automatic")
      return
    }
    let askListed = try policy(.prompt, [a], terminal: true)
    guard case .prompt = askListed.confirmation else {
      Issue.record("--allow with --confirm prompt should ask")
      return
    }
    #expect(askListed.allowedDevices == [a])
  }

  @Test func advertisePairableOptions() throws {
    let a = BluetoothAddress(rawValue: "00:AA:01:00:00:00")!
    let b = BluetoothAddress(rawValue: "00:AA:01:00:00:01")!
    let allowed = try AdvertiseCommand.parse(
      ["-m", "x", "--pairable", "--allow", "00:aa:01:00:00:00", "--allow", b.rawValue])
    #expect(allowed.pairing?.allowedDevices == [a, b])
    #expect(allowed.pairing?.servedServices == [BlekitUUID.transferService])
    let clock = try AdvertiseCommand.parse(
      ["-m", "x", "--pairable", "--confirm", "auto", "--read-clock"])
    #expect(clock.pairing?.allowedDevices == nil)
    #expect(clock.pairing?.servedServices == [BlekitUUID.transferService, BlekitUUID.readService])
    #expect(try AdvertiseCommand.parse(["-m", "x"]).pairing == nil)
    #expect(throws: UsageError.self) {
      try AdvertiseCommand.parse(["-m", "x", "--pairable", "--allow", "nobody"])
    }
    #expect(throws: UsageError.self) {
      try AdvertiseCommand.parse(["-m", "x", "--allow", a.rawValue])
    }
    #expect(throws: UsageError.self) {
      try AdvertiseCommand.parse(["-m", "x", "--confirm", "auto"])
    }
    guard !canPrompt else { return }
    let missing = #expect(throws: UsageError.self) {
      try AdvertiseCommand.parse(["-m", "x", "--pairable"])
    }
    #expect(missing?.message.contains("--confirm auto") == true)
    #expect(missing?.message.contains("--allow ADDRESS") == true)
  }

  @Test func trustAndUnpairArguments() throws {
    let trust = try TrustCommand.parse(["00:AA:01:01:00:42", "--revoke"])
    #expect(trust.revoke)
    #expect(trust.address.rawValue == "00:AA:01:01:00:42")
    let unpair = try UnpairCommand.parse(["00:aa:01:01:00:42", "--adapter", "hci1"])
    #expect(unpair.address.rawValue == "00:AA:01:01:00:42")
    #expect(unpair.adapter == "hci1")
  }

  @Test func agentLogLines() {
    let address = BluetoothAddress(rawValue: "00:AA:01:00:00:00")
    #expect(sixDigits(42) == "000042")
    #expect(sixDigits(999_999) == "999999")
    func question(_ request: AgentRequest) -> PairingQuestion {
      PairingQuestion(request: request, address: address)
    }
    let device: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_00_00_00"
    #expect(
      describePairingEvent(
        .accepted(
          question(.requestConfirmation(device: device, passkey: 4242)), .acceptsEveryDevice))
        == "pairing: accepted RequestConfirmation (passkey 004242) from 00:AA:01:00:00:00: "
        + "--confirm auto accepts every device")
    #expect(
      describePairingEvent(.accepted(question(.requestAuthorization(device: device)), .allowed))
        == "pairing: accepted RequestAuthorization (pairing) from 00:AA:01:00:00:00: "
        + "named on the command line")
    #expect(
      describePairingEvent(
        .accepted(PairingQuestion(request: .requestPasskey(device: device), address: nil), .person))
        == "pairing: accepted RequestPasskey from an unknown device: answered on the terminal")
    #expect(
      describePairingEvent(.displayPasskey(address, passkey: 7, entered: 3))
        == "passkey for 00:AA:01:00:00:00: 000007 (3 digits typed)")
    #expect(
      describePairingEvent(.refused(question(.requestAuthorization(device: device)), .notAllowed))
        == "pairing: refused RequestAuthorization (pairing) from 00:AA:01:00:00:00: "
        + "not a device named on the command line")
    #expect(
      describePairingEvent(
        .refused(question(.authorizeService(device: device, uuid: "180f")), .serviceNotServed))
        == "pairing: refused AuthorizeService (service 180f) from 00:AA:01:00:00:00: "
        + "not a service blekit serves")
  }

  @Test func pairingStateLine() {
    let state = PairingState(paired: true, bonded: true, trusted: false, connected: false)
    #expect(PairCommand.describe(state) == "paired yes, bonded yes, trusted no")
    let old = PairingState(paired: true, bonded: nil, trusted: true, connected: true)
    #expect(PairCommand.describe(old) == "paired yes, bonded unknown, trusted yes")
  }
}
