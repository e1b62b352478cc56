// pair, unpair and trust: argument checks, and the agent's log lines.

import ArgumentParsing
import BLEKit
import BlueZ
import Bluetooth
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
    // Without --confirm, a script confirms automatically.
    guard case .automatic = try PairCommand.parse(["00:AA:01:01:00:42"]).confirmation else {
      Issue.record("without a terminal, the default should be auto")
      return
    }
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
    #expect(
      describePairingEvent(.confirmed(address, passkey: 4242, automatically: true))
        == "confirmed passkey 004242 with 00:AA:01:00:00:00 (--confirm auto)")
    #expect(
      describePairingEvent(.authorized(nil, automatically: false))
        == "accepted pairing with a device")
    #expect(
      describePairingEvent(.displayPasskey(address, passkey: 7, entered: 3))
        == "passkey for 00:AA:01:00:00:00: 000007 (3 digits typed)")
    #expect(
      describePairingEvent(.refused(address, question: "RequestPasskey", reason: "no"))
        == "refused RequestPasskey from 00:AA:01:00:00:00: no")
  }

  @Test func pairingStateLine() {
    let state = PairingState(paired: true, bonded: true, trusted: false, connected: false)
    #expect(PairCommand.describe(state) == "paired yes, bonded yes, trusted no")
    let old = PairingState(paired: true, bonded: nil, trusted: true, connected: true)
    #expect(PairCommand.describe(old) == "paired yes, bonded unknown, trusted yes")
  }
}
