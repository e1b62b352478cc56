// The GATT server's requests and indications against a fake bluetoothd on a private bus:
// reads and writes name the central, MTU and link; writable descriptors; indications wait for
// Confirm; per-central notification is refused; the state tracker follows the adapter.
import BlueZ
import Bluetooth
import DBus
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

@Suite(.timeLimit(.minutes(1)), .serialized)
struct GattServerRequestTests {
  static let service = BluetoothUUID(uint16: 0xFFE0)
  static let readable = BluetoothUUID(uint16: 0xFFE1)
  static let indicating = BluetoothUUID(uint16: 0xFFE2)
  static let named = BluetoothUUID(uint16: 0x2901)
  /// Writable, with no `onWrite`: the app sees its writes only as events.
  static let writable = BluetoothUUID(uint16: 0xFFE3)
  static let central = "/org/bluez/hci0/dev_00_AA_01_00_00_00"

  struct Fixture {
    let bus: PrivateBus
    let bluetoothd: FakeBluetoothd
    let app: DBusConnection
    let manager: PeripheralManager
    let indicating: MutableCharacteristic
    let paths: [String: ObjectPath]
    let reads: ReadLog

    func path(_ uuid: BluetoothUUID) -> ObjectPath { paths[uuid.uuidString.lowercased()]! }

    func call(_ member: MemberName, _ uuid: BluetoothUUID, _ arguments: [DBusValue] = [])
      async throws -> [DBusValue]
    {
      try await bluetoothd.callCharacteristic(
        member, on: path(uuid), owner: app.uniqueName, arguments: arguments)
    }

    /// Calls a GattDescriptor1 method on the characteristic's first descriptor.
    func callDescriptor(_ member: MemberName, _ arguments: [DBusValue]) async throws
      -> [DBusValue]
    {
      try await bluetoothd.connection.call(
        destination: app.uniqueName, path: path(GattServerRequestTests.readable).appending("desc0"),
        interface: "org.bluez.GattDescriptor1", member: member, arguments: arguments)
    }
  }

  /// The read requests the readable characteristic's handler saw.
  final class ReadLog: Sendable {
    let requests = Mutex<[ATTReadRequest]>([])
  }

  static func withFixture(
    eventLimit: Int = PeripheralManager.eventLimit, _ body: (Fixture) async throws -> Void
  ) async throws {
    let bus = try PrivateBus()
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let app = try bus.connect()
    let manager = try await PeripheralManager.open(
      adapter: "hci0", connection: app, eventLimit: eventLimit)
    let reads = ReadLog()
    let readable = MutableCharacteristic(
      type: readable, properties: [.read], permissions: [.readable],
      descriptors: [.userDescription("old name", writable: true)],
      onRead: { request in
        reads.requests.withLock { $0.append(request) }
        return [1, 2, 3]
      })
    let indicating = MutableCharacteristic(
      type: indicating, properties: [.indicate], permissions: [])
    let writable = MutableCharacteristic(
      type: writable, properties: [.write, .writeWithoutResponse], permissions: [.writeable])
    try await manager.add(
      MutableService(type: service, characteristics: [readable, indicating, writable]))
    let root = try #require(bluetoothd.registry.applications.withLock { Array($0.keys) }.first)
    let paths = try await bluetoothd.characteristics(of: root, owner: app.uniqueName)
    let fixture = Fixture(
      bus: bus, bluetoothd: bluetoothd, app: app, manager: manager, indicating: indicating,
      paths: paths, reads: reads)
    var failure: (any Error)?
    do { try await body(fixture) } catch { failure = error }
    await manager.close()
    app.close()
    bluetoothd.close()
    bus.stop()
    if let failure { throw failure }
  }

  @Test func readsNameTheCentralItsMTUAndLink() async throws {
    try await Self.withFixture { fixture in
      let reply = try await fixture.call(
        "ReadValue", Self.readable,
        [
          .dictionaryOfVariants([
            "offset": .uint16(1), "mtu": .uint16(185), "link": .string("LE"),
            "device": .objectPath(ObjectPath(Self.central)),
          ])
        ])
      #expect(reply.first?.bytesValue == [2, 3])
      let request = try #require(fixture.reads.requests.withLock { $0.first })
      #expect(request.central?.address == "00:AA:01:00:00:00")
      #expect(request.mtu == 185)
      #expect(request.link == .le)
      #expect(request.offset == 1)
      #expect(request.descriptor == nil)
    }
  }

  @Test func writableDescriptorStoresAndReportsWrites() async throws {
    try await Self.withFixture { fixture in
      let before = try await fixture.callDescriptor("ReadValue", [.dictionaryOfVariants([:])])
      #expect(before.first?.bytesValue == Array("old name".utf8))
      _ = try await fixture.callDescriptor(
        "WriteValue",
        [
          .bytes(Array("new".utf8)),
          .dictionaryOfVariants([
            "device": .objectPath(ObjectPath(Self.central)), "link": .string("LE"),
          ]),
        ])
      let after = try await fixture.callDescriptor("ReadValue", [.dictionaryOfVariants([:])])
      #expect(after.first?.bytesValue == Array("new".utf8))
      for await event in fixture.manager.events {
        guard case .write(let request) = event else { continue }
        #expect(request.characteristic == Self.readable)
        #expect(request.descriptor == Self.named)
        #expect(request.value == Array("new".utf8))
        #expect(request.central?.address == "00:AA:01:00:00:00")
        #expect(request.link == .le)
        break
      }
    }
  }

  @Test func indicationReturnsOnConfirm() async throws {
    try await Self.withFixture { fixture in
      let path = fixture.path(Self.indicating)
      // The fake answers each Value signal with Confirm, as bluetoothd does on the central's
      // confirmation.
      let values = try await fixture.bluetoothd.connection.signals(
        MatchRule(path: path, interface: .properties, member: "PropertiesChanged"))
      _ = try await fixture.call("StartNotify", Self.indicating)
      let confirmer = Task {
        var seen = 0
        for try await signal in values {
          guard signal.arguments.count > 1,
            signal.arguments[1].stringVariantDictionary?["Value"] != nil
          else { continue }
          seen += 1
          _ = try await fixture.call("Confirm", Self.indicating)
          if seen == 2 { return seen }
        }
        return seen
      }
      try await fixture.manager.indicate([0x01], for: fixture.indicating)
      try await fixture.manager.indicate([0x02], for: fixture.indicating)
      #expect(try await confirmer.value == 2)
    }
  }

  @Test func unconfirmedIndicationFailsAfterItsTimeout() async throws {
    try await Self.withFixture { fixture in
      _ = try await fixture.call("StartNotify", Self.indicating)
      let error = await #expect(throws: BluetoothError.self) {
        try await fixture.manager.indicate(
          [0x01], for: fixture.indicating, timeout: .milliseconds(100))
      }
      #expect(error?.code == .notConfirmed)
    }
  }

  @Test func indicationWithoutSubscriberOrIndicatePropertyIsRefused() async throws {
    try await Self.withFixture { fixture in
      let unsubscribed = await #expect(throws: BluetoothError.self) {
        try await fixture.manager.indicate([0x01], for: fixture.indicating)
      }
      #expect(unsubscribed?.code == .notSubscribed)
      // StopNotify while an indication waits ends it as unsubscribed, not as a timeout.
      _ = try await fixture.call("StartNotify", Self.indicating)
      let waiting = Task {
        try await fixture.manager.indicate([0x01], for: fixture.indicating)
      }
      while fixture.manager.subscribers(of: fixture.indicating).isSubscribed == false {
        await Task.yield()
      }
      try await Task.sleep(for: .milliseconds(50))
      _ = try await fixture.call("StopNotify", Self.indicating)
      let ended = await #expect(throws: BluetoothError.self) { try await waiting.value }
      #expect(ended?.code == .notSubscribed)
    }
  }

  @Test func perCentralNotificationIsRefusedNamingBlueZ() async throws {
    try await Self.withFixture { fixture in
      _ = try await fixture.call("StartNotify", Self.indicating)
      let subscribers = fixture.manager.subscribers(of: fixture.indicating)
      #expect(subscribers.isSubscribed && subscribers.known.isEmpty && !subscribers.isComplete)
      let error = #expect(throws: BluetoothError.self) {
        try fixture.manager.updateValue(
          [0x01], for: fixture.indicating,
          onSubscribedCentrals: [Central(identifier: Self.central)])
      }
      #expect(error?.code == .notSupported)
      // An indicating characteristic uses the signal path until bluetoothd reports
      // confirmations on the socket (5.80); the refusal for notify sockets is in
      // PerDeviceNotifySocketTests.
      #expect(error?.message.contains("5.80") == true)
    }
  }

  @Test func stateTrackerFollowsTheAdapterAndBluetoothd() {
    let adapter: ObjectPath = "/org/bluez/hci1"
    var tracker = PeripheralStateTracker(
      adapter: adapter, powered: true, serviceRunning: true, accessDenied: false)
    #expect(tracker.state == .poweredOn)
    tracker.apply(
      .propertiesChanged(
        adapter, Adapter1.interface, changed: ["Powered": .bool(false)], invalidated: [],
        current: ["Powered": .bool(false)]))
    #expect(tracker.state == .poweredOff)
    // Another adapter's changes do not matter.
    tracker.apply(
      .propertiesChanged(
        "/org/bluez/hci0", Adapter1.interface, changed: ["Powered": .bool(true)], invalidated: [],
        current: ["Powered": .bool(true)]))
    #expect(tracker.state == .poweredOff)
    tracker.apply(.serviceStopped)
    #expect(tracker.state == .serviceUnavailable)
    tracker.apply(.interfacesRemoved(adapter, [Adapter1.interface]))
    tracker.apply(.serviceStarted)
    #expect(tracker.state == .unsupported)
    tracker.apply(.interfacesAdded(adapter, [Adapter1.interface: ["Powered": .bool(true)]]))
    #expect(tracker.state == .poweredOn)
    tracker.apply(.accessDenied("no"))
    #expect(tracker.state == .unauthorized)
  }

  @Test func presentationFormatBytesAndPermissionFlags() {
    let format = PresentationFormat(
      format: PresentationFormat.sint16, exponent: -2, unit: 0x272F, formatDescription: 0x0106)
    #expect(format.bytes == [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x06, 0x01])
    let strict: AttributePermissions = [
      .readAuthenticationRequired, .writeAuthenticationRequired, .readSecureConnectionsRequired,
      .writeSecureConnectionsRequired,
    ]
    #expect(
      CharacteristicProperties([.read, .write]).gattFlags(permissions: strict).map(\.rawValue)
        == [
          "read", "write", "encrypt-authenticated-read", "secure-read",
          "encrypt-authenticated-write", "secure-write",
        ])
    #expect(
      CharacteristicProperties.read.gattFlags(permissions: strict).map(\.rawValue)
        == ["read", "encrypt-authenticated-read", "secure-read"])
  }
}
