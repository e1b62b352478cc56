// The GATT sender's limits (TransferPeripheral.deadlines) against a stand-in bluetoothd whose
// central subscribes and then never takes a value: the notification socket fills, the send
// waits for room that never comes, and must be given up after the idle timeout.
import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct TransferPeripheralDeadlineTests {
  @Test func aCentralThatStopsTakingValuesIsGivenUpAtTheIdleTimeout() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    defer { bluetoothd.close() }
    let appConnection = try bus.connect()
    defer { appConnection.close() }
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: appConnection)
    let message = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let transfer = TransferPeripheral(
      manager: manager, message: message,
      deadlines: TransferDeadlines(deadline: .seconds(30), idleTimeout: .seconds(1)))
    try await manager.add(transfer.service)
    let events = transfer.serve()
    let root = try #require(bluetoothd.registry.applications.withLock { Array($0.keys) }.first)
    let paths = try await bluetoothd.characteristics(of: root, owner: appConnection.uniqueName)
    let sequenced = try #require(
      paths[BlekitUUID.sequencedTransferCharacteristic.uuidString.lowercased()])
    // The central subscribes (bluetoothd's AcquireNotify) and then reads nothing.
    let reply = try await bluetoothd.callCharacteristic(
      "AcquireNotify", on: sequenced, owner: appConnection.uniqueName,
      arguments: [.dictionaryOfVariants(["mtu": .uint16(100)])])
    let socket = try #require(reply.first?.fileDescriptorValue)
    let start = ContinuousClock.now
    let guardTask = Task {
      try await Task.sleep(for: .seconds(10))
      Issue.record("the send was still waiting after 10 s")
      _ = socket.take().map { close($0) }
    }
    var ending: TransferPeripheral.Event?
    for await event in events {
      switch event {
      case .timedOut, .cut, .sent:
        ending = event
      default:
        continue
      }
      break
    }
    guardTask.cancel()
    let took = ContinuousClock.now - start
    guard case .timedOut(.sequenced, let sent, message.count, .idle(.seconds(1))) = ending else {
      Issue.record("expected the idle timeout to end the send, got \(String(describing: ending))")
      await manager.close()
      return
    }
    #expect(sent > 0 && sent < message.count)
    #expect(took < .seconds(8))
    _ = socket.take().map { close($0) }
    await manager.close()
  }
}
