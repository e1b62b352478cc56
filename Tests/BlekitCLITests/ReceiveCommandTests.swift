// receive's arguments: --from, and what it refuses.

import ArgumentParsing
import BLEKit
import Bluetooth
import Foundation
import Testing

@testable import blekit

@Suite struct ReceiveCommandTests {
  @Test func fromTakesAnAddressOrAName() throws {
    let byAddress = try ReceiveCommand.parse(["--from", "00:AA:01:01:00:01"])
    #expect(byAddress.from == .address(BluetoothAddress(rawValue: "00:AA:01:01:00:01")!))
    let byName = try ReceiveCommand.parse(["--from", "blekit-b"])
    #expect(byName.from == .name("blekit-b"))
    let any = try ReceiveCommand.parse([])
    #expect(any.from == nil)
    #expect(any.timeout == .seconds(30))
  }

  @Test func badTargetsAndCombinationsAreUsageErrors() {
    #expect(throws: UsageError.self) { try ReceiveCommand.parse(["--from", "00:AA:01:01:00"]) }
    #expect(throws: UsageError.self) { try ReceiveCommand.parse(["--from", ""]) }
    #expect(throws: UsageError.self) {
      try ReceiveCommand.parse(["--from", "00:AA:01:01:00:01", "--min-rssi", "-60"])
    }
    #expect(throws: UsageError.self) { try ReceiveCommand.parse(["--count", "0"]) }
  }
}

@Suite struct ReceiveOutputTests {
  @Test func outputOptionsAndTheirConflicts() throws {
    let command = try ReceiveCommand.parse(["-z", "--count", "3", "--accept-unordered"])
    #expect(command.nul && command.acceptUnordered && command.count == 3)
    #expect(try ReceiveCommand.parse([]).acceptUnordered == false)
    #expect(throws: UsageError.self) { try ReceiveCommand.parse(["--json", "--null"]) }
  }

  @Test func terminalTextShowsControlsAndEndsWithANewline() {
    #expect(TerminalText.show(Array("hi".utf8)) == Array("hi\n".utf8))
    #expect(TerminalText.show(Array("two\nlines\n".utf8)) == Array("two\nlines\n".utf8))
    // An escape sequence that would clear the screen, a bell, DEL and C1's CSI: all visible.
    #expect(
      TerminalText.show(Array("a\u{1B}[2J\u{07}\u{7F}\u{9B}b\tc".utf8))
        == Array("a\\x1b[2J\\x07\\x7f\\x9bb\tc\n".utf8))
    #expect(TerminalText.show([]) == Array("\n".utf8))
  }

  @Test func bytesThatAreNotTextAreShownAsHex() {
    let bytes: [UInt8] = [0xFF, 0x00] + Array(0x41...0x50)
    #expect(
      String(decoding: TerminalText.show(bytes), as: UTF8.self)
        == "00000000  ff 00 41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e\n"
        + "00000010  4f 50\n")
  }

  @Test(
    arguments: [
      ([], ""), ([0x66], "Zg=="), ([0x66, 0x6F], "Zm8="), ([0x66, 0x6F, 0x6F], "Zm9v"),
      ([0x66, 0x6F, 0x6F, 0x62, 0x61, 0x72], "Zm9vYmFy"), ([0xFF, 0xFE, 0x00], "//4A"),
    ] as [([UInt8], String)])
  func base64MatchesRFC4648(bytes: [UInt8], text: String) {
    #expect(Base64.encode(bytes) == text)
  }

  @Test func everyByteValueSurvivesBase64() throws {
    let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    let decoded = try #require(Data(base64Encoded: Base64.encode(bytes)))
    #expect(Array(decoded) == bytes)
  }

  @Test func unverifiedTransfersHaveTheirOwnExitStatus() {
    for error: BluetoothError in [
      .orderNotGuaranteed("EATT"), .checksumMismatch(message: 1, expected: 1, actual: 2),
      .lengthMismatch(message: 1, expected: 3, actual: 2), .malformedFrame("short"),
    ] {
      #expect((exitError(error) as? CLIError)?.exitStatus == .unverified)
    }
    #expect(
      (exitError(BluetoothError.messageTooLarge(limit: 9)) as? CLIError)?.exitStatus
        == .failure)
  }
}
