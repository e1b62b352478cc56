import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

// A connected peripheral as bluetoothd exports it (a stand-in org.bluez on a private bus):
// Device1, one GattService1 (Nordic UART) and its RX characteristic, whose ReadValue returns
// "ready", whose WriteValue calls are recorded, whose AcquireWrite hands out one end of a
// real socket pair, keeping the other as bluetoothd does, and whose AcquireNotify and
// StartNotify never answer.
@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

enum RemoteGattFixture {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let service = device.appending("service000a")
  static let characteristic = service.appending("char000b")
  static let uartRX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"

  /// The stand-in's end of the last socket handed out.
  final class Kept: Sendable {
    let fd = Mutex<Int32>(-1)
    /// AcquireWrite calls.
    let calls = Mutex(0)
    /// AcquireNotify and StartNotify calls (none is answered).
    let subscriptions = Mutex(0)
    /// StopNotify calls.
    let stops = Mutex(0)
    /// The values of WriteValue calls, with their `type` option.
    let writes = Mutex<[([UInt8], String)]>([])
  }

  /// A connected device with one service and a characteristic with the given flags and an
  /// AcquireWrite that returns MTU 50.
  private static func make(flags: [String]) async throws -> (
    PrivateBus, FakeBlueZObjects, CentralManager, Peripheral, RemoteCharacteristic, Kept
  ) {
    let bus = try PrivateBus()
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      device, address: "00:AA:01:01:00:01", service: service,
      serviceUUID: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
    let kept = Kept()
    var characteristicInterface = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      [
        "UUID": .string(uartRX), "Service": .objectPath(service), "MTU": .uint16(50),
        "Flags": .strings(flags),
      ])
    characteristicInterface.methods.append(
      ExportedMethod(name: "ReadValue", inSignature: "a{sv}", outSignature: "ay") { _ in
        [.bytes(Array("ready".utf8))]
      })
    characteristicInterface.methods.append(
      ExportedMethod(name: "WriteValue", inSignature: "aya{sv}", outSignature: "") { call in
        let value = call.arguments.first?.bytesValue ?? []
        let type = call.arguments.last?.stringVariantDictionary?["type"]?.stringValue ?? ""
        kept.writes.withLock { $0.append((value, type)) }
        return []
      })
    characteristicInterface.methods.append(
      ExportedMethod(name: "AcquireWrite", inSignature: "a{sv}", outSignature: "hq") { _ in
        let fds = try FakeBlueZObjects.socketPair()
        // A small send buffer, so that a few values fill it.
        var size: Int32 = 4096
        _ = setsockopt(
          fds.handedOut, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        kept.fd.withLock { $0 = fds.kept }
        kept.calls.withLock { $0 += 1 }
        return [.unixFD(FileDescriptor(owning: fds.handedOut)), .uint16(50)]
      })
    // Subscriptions are never answered, as bluetoothd 5.66 leaves an AcquireNotify that is
    // pending when the link drops (the handler waits until the test is over).
    for member: MemberName in ["AcquireNotify", "StartNotify"] {
      characteristicInterface.methods.append(
        ExportedMethod(
          name: member, inSignature: member == "AcquireNotify" ? "a{sv}" : "",
          outSignature: member == "AcquireNotify" ? "hq" : ""
        ) { _ in
          kept.subscriptions.withLock { $0 += 1 }
          try await Task.sleep(for: .seconds(300))
          throw DBusError.remote(name: "org.bluez.Error.Failed", message: "never answered")
        })
    }
    characteristicInterface.methods.append(
      ExportedMethod(name: "StopNotify", inSignature: "", outSignature: "") { _ in
        kept.stops.withLock { $0 += 1 }
        return []
      })
    try bluez.connection.export(
      ExportedObject(interfaces: [characteristicInterface]), at: characteristic)
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let found = try #require(try await peripheral.services().first)
    let remote = try #require(try await peripheral.characteristics(for: found).first)
    return (bus, bluez, central, peripheral, remote, kept)
  }

  /// Runs `body` with a fresh fixture (the stand-in's objects, the peripheral, its
  /// characteristic and what the stand-in kept) and tears it down, whether or not it threw.
  static func with(
    flags: [String],
    _ body: (FakeBlueZObjects, Peripheral, RemoteCharacteristic, Kept) async throws -> Void
  ) async throws {
    let (bus, bluez, central, peripheral, remote, kept) = try await make(flags: flags)
    defer { bus.stop() }
    do {
      try await body(bluez, peripheral, remote, kept)
    } catch {
      await central.close()
      bluez.close()
      throw error
    }
    await central.close()
    bluez.close()
  }
}
