// `monitor` tells bluetoothd stopping from a power-off by the central's state: the wait follows
// the state updates, so it ends when bluetoothd leaves the bus, and at its limit otherwise.
// The stand-in bluetoothd runs on a private bus.

import BLEKit
import BlueZ
import TestSupport
import Testing

@testable import blekit

@Suite(.timeLimit(.minutes(1)))
struct CentralStateWaitTests {
  static let clock = ContinuousClock()

  @Test func theWaitEndsWhenBluetoothdLeaves() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let manager = try await CentralManager.open(connection: try bus.connect())
    let leave = Task {
      try await Task.sleep(for: .milliseconds(300))
      bluez.close()
    }
    let start = Self.clock.now
    let stopped = await centralState(
      of: manager, becomes: .serviceUnavailable, within: .seconds(30))
    let waited = Self.clock.now - start
    #expect(stopped)
    #expect(waited >= .milliseconds(300))
    #expect(waited < .seconds(15))
    try await leave.value
    await manager.close()
  }

  @Test func theWaitEndsAtItsLimitWhileBluetoothdStays() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let manager = try await CentralManager.open(connection: try bus.connect())
    let start = Self.clock.now
    let stopped = await centralState(
      of: manager, becomes: .serviceUnavailable, within: .milliseconds(500))
    let waited = Self.clock.now - start
    #expect(!stopped)
    #expect(waited >= .milliseconds(500))
    #expect(waited < .seconds(10))
    await manager.close()
    bluez.close()
  }
}
