import BlueZ
import DBus
import Synchronization
import TestSupport
import Testing

// Which subscription path `notifications(for:)` takes, against a stand-in bluetoothd that
// behaves as BlueZ's src/gatt-client.c does with a peripheral that sends a value while still
// answering the subscribing CCCD write, then an empty value: StartNotify emits
// PropertiesChanged(Value) for the early value before its reply; AcquireNotify's socket exists
// only once the write is answered, so the early value is dropped (`notify_io_cb`), and later
// values come as datagrams.
@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct NotificationPathTests {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_02")
  static let service = device.appending("service0010")
  static let characteristic = service.appending("char0011")
  static let early = Array("early".utf8)
  static let later: [[UInt8]] = [[], Array("later".utf8)]

  /// The stand-in's end of the AcquireNotify socket, kept open until the test is over.
  final class Kept: Sendable {
    let fd = Mutex<Int32>(-1)
  }

  /// A connected device whose one characteristic has `flags`, subscribed as described above
  /// (StartNotify's values after the early one are `later`);
  /// runs `body` with the peripheral and the characteristic.
  static func with(
    flags: [String], later: [[UInt8]] = NotificationPathTests.later,
    _ body: (Peripheral, RemoteCharacteristic) async throws -> Void
  ) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      device, address: "00:AA:01:01:00:02", service: service,
      serviceUUID: "6e7a0100-5d3b-4c1e-9a0b-1a2b3c4d5e6f")
    let kept = Kept()
    defer { kept.fd.withLock { if $0 >= 0 { close($0) } } }
    var interface = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      [
        "UUID": .string("6e7a0111-5d3b-4c1e-9a0b-1a2b3c4d5e6f"), "Service": .objectPath(service),
        "Flags": .strings(flags),
      ])
    let connection = bluez.connection
    @Sendable func emitValue(_ value: [UInt8]) throws {
      try connection.emitPropertiesChanged(
        path: characteristic, interface: GattCharacteristic1.interface,
        changed: ["Value": .bytes(value)])
    }
    interface.methods.append(
      ExportedMethod(name: "StartNotify", inSignature: "", outSignature: "") { _ in
        // The early value reaches bluetoothd before the Write Response, and the reply after.
        try emitValue(early)
        Task {
          try? await Task.sleep(for: .milliseconds(50))
          for value in later { try? emitValue(value) }
        }
        return []
      })
    interface.methods.append(
      ExportedMethod(name: "AcquireNotify", inSignature: "a{sv}", outSignature: "hq") { _ in
        guard flags.contains("notify") else {
          throw DBusError.remote(name: "org.bluez.Error.NotSupported", message: "Not supported")
        }
        // The early value came while there was no socket yet: dropped.
        let fds = try FakeBlueZObjects.socketPair()
        kept.fd.withLock { $0 = fds.kept }
        Task {
          try? await Task.sleep(for: .milliseconds(50))
          for value in later {
            _ = value.withUnsafeBytes { send(fds.kept, $0.baseAddress, $0.count, 0) }
          }
        }
        return [.unixFD(FileDescriptor(owning: fds.handedOut)), .uint16(247)]
      })
    interface.methods.append(
      ExportedMethod(name: "StopNotify", inSignature: "", outSignature: "") { _ in [] })
    try connection.export(ExportedObject(interfaces: [interface]), at: characteristic)
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:02")))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let found = try #require(try await peripheral.services().first)
    let remote = try #require(try await peripheral.characteristics(for: found).first)
    do {
      try await body(peripheral, remote)
    } catch {
      await central.close()
      throw error
    }
    await central.close()
  }

  /// The first `count` values of `stream`, or what came within five seconds.
  static func first(_ count: Int, of stream: NotificationStream) async -> [[UInt8]] {
    let got = Mutex<[[UInt8]]>([])
    _ = await within(.seconds(5)) {
      do {
        for try await value in stream {
          let seen = got.withLock {
            $0.append(value)
            return $0.count
          }
          if seen == count { return }
        }
      } catch {}
    }
    return got.withLock { $0 }
  }

  /// By default the early value and the empty one arrive, in order, through StartNotify.
  @Test(arguments: [["notify"], ["indicate"], ["notify", "indicate"]])
  func theDefaultPathDeliversAnEarlyValueAndAnEmptyOne(flags: [String]) async throws {
    try await Self.with(flags: flags) { peripheral, remote in
      let stream = try await peripheral.notifications(for: remote)
      #expect(stream.method == .startNotify)
      #expect(await Self.first(3, of: stream) == [Self.early] + Self.later)
      await stream.stop()
    }
  }

  /// On request, a notifying characteristic is read through AcquireNotify's socket (where the
  /// early value is lost, as with bluetoothd), the empty value still a value; one that only
  /// indicates goes through StartNotify.
  @Test func acquireOnRequestForNotifyingCharacteristics() async throws {
    try await Self.with(flags: ["notify"]) { peripheral, remote in
      let stream = try await peripheral.notifications(for: remote, preferAcquire: true)
      #expect(stream.method == .acquiredSocket(mtu: 247))
      #expect(await Self.first(2, of: stream) == Self.later)
      await stream.stop()
    }
    try await Self.with(flags: ["indicate"]) { peripheral, remote in
      let stream = try await peripheral.notifications(for: remote, preferAcquire: true)
      #expect(stream.method == .startNotify)
      #expect(await Self.first(3, of: stream) == [Self.early] + Self.later)
      await stream.stop()
    }
  }
}
