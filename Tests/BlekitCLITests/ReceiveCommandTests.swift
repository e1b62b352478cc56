// receive's arguments: --from, and what it refuses.

import ArgumentParsing
import BLEKit
import Bluetooth
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
