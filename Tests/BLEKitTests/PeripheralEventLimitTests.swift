// PeripheralManager.events when the app does not read them for a while (a real dbus-daemon, a
// stand-in bluetoothd sending WriteValue as BlueZ does for each ATT write): at most the bound
// of events waits; beyond it a write request the event alone would carry is refused (the
// central gets an ATT error), a write without response is accepted and its event dropped, and
// both are counted; a subscription is queued all the same.
import BlueZ
import Bluetooth
import DBus
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1)), .serialized)
struct PeripheralEventLimitTests {
  typealias Fixture = GattServerRequestTests.Fixture

  /// A WriteValue from central `GattServerRequestTests.central`, `type` "request" or "command".
  static func write(_ value: [UInt8], type: String, in fixture: Fixture) async throws {
    _ = try await fixture.call(
      "WriteValue", GattServerRequestTests.writable,
      [
        .bytes(value),
        .dictionaryOfVariants([
          "type": .string(type), "device": .objectPath(ObjectPath(GattServerRequestTests.central)),
          "link": .string("LE"),
        ]),
      ])
  }

  @Test func writesBeyondTheBoundAreRefusedOrDroppedAndCounted() async throws {
    let limit = 50
    try await GattServerRequestTests.withFixture(eventLimit: limit) { fixture in
      let manager = fixture.manager
      // Nobody reads the events: the first `limit` writes are queued.
      for index in 0..<limit { try await Self.write([UInt8(index)], type: "request", in: fixture) }
      #expect(manager.eventQueue.unread == limit)
      // Then a write request is refused: the central learns its value did not land.
      var refusals: [String] = []
      for index in limit..<limit + 10 {
        do {
          try await Self.write([UInt8(index)], type: "request", in: fixture)
        } catch let error as DBusError where error.code == .remote {
          refusals.append(error.name ?? "")
        }
      }
      #expect(refusals == Array(repeating: "org.bluez.Error.Failed", count: 10))
      // A write without response cannot be refused: accepted, its event dropped.
      for index in 0..<5 {
        try await Self.write([0xC0 + UInt8(index)], type: "command", in: fixture)
      }
      #expect(manager.eventQueue.unread == limit)
      #expect(manager.refusedWrites == 10)
      #expect(manager.droppedWriteEvents == 5)
      // Events that are not writes are queued all the same: a subscription is never lost.
      _ = try await fixture.call("StartNotify", GattServerRequestTests.indicating)
      #expect(manager.eventQueue.unread == limit + 1)
      // The events queued are the first `limit` writes, in order; reading makes room again.
      var events = manager.events.makeAsyncIterator()
      for index in 0..<limit {
        guard case .write(let request) = await events.next() else {
          Issue.record("event \(index) is not a write")
          return
        }
        #expect(request.value == [UInt8(index)])
      }
      guard case .subscribed = await events.next() else {
        Issue.record("the subscription after the writes is not an event")
        return
      }
      #expect(manager.eventQueue.unread == 0)
      try await Self.write([0xEE], type: "request", in: fixture)
      guard case .write(let request) = await events.next() else {
        Issue.record("the write after the room came back is not an event")
        return
      }
      #expect(request.value == [0xEE])
      #expect(manager.refusedWrites == 10)
    }
  }
}
