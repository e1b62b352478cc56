// A GATT server's notify sockets as each BlueZ release hands them out, against a fake
// bluetoothd on a private bus: one AcquireNotify per central (5.69 and later) gives an exact
// subscriber list; values go to chosen centrals only where a socket reaches its own central
// only (5.76 and later), and are refused before; indications go through the sockets where
// bluetoothd writes each central's confirmation to its socket (5.80 and later).
import BlueZ
import Bluetooth
import DBus
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1)), .serialized)
struct PerDeviceNotifySocketTests {
  static let service = BluetoothUUID(uint16: 0xFFD0)
  static let notifyUUID = BluetoothUUID(uint16: 0xFFD1)
  static let indicateUUID = BluetoothUUID(uint16: 0xFFD2)
  static let centralA = "/org/bluez/hci0/dev_00_AA_01_00_00_00"
  static let centralB = "/org/bluez/hci0/dev_00_AA_01_02_00_02"

  struct Fixture {
    let bluetoothd: FakeBluetoothd
    let app: DBusConnection
    let manager: PeripheralManager
    let notifying: MutableCharacteristic
    let indicating: MutableCharacteristic
    let paths: [String: ObjectPath]

    /// bluetoothd's AcquireNotify for `device`: its end of the socket.
    func acquire(_ uuid: BluetoothUUID, for device: String) async throws -> FileDescriptor {
      let reply = try await bluetoothd.callCharacteristic(
        "AcquireNotify", on: paths[uuid.uuidString.lowercased()]!, owner: app.uniqueName,
        arguments: [
          .dictionaryOfVariants(["device": .objectPath(ObjectPath(device)), "mtu": .uint16(100)])
        ])
      return try #require(reply.first?.fileDescriptorValue)
    }
  }

  static func withFixture(
    _ version: BluetoothdVersion?, _ body: (Fixture) async throws -> Void
  ) async throws {
    let bus = try PrivateBus()
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let app = try bus.connect()
    let manager = try await PeripheralManager.open(
      adapter: "hci0", connection: app, bluetoothd: BluetoothdFeatures(version: version))
    let notifying = MutableCharacteristic(
      type: notifyUUID, properties: [.notify], permissions: [])
    let indicating = MutableCharacteristic(
      type: indicateUUID, properties: [.indicate], permissions: [])
    try await manager.add(MutableService(type: service, characteristics: [notifying, indicating]))
    let root = try #require(bluetoothd.registry.applications.withLock { Array($0.keys) }.first)
    let paths = try await bluetoothd.characteristics(of: root, owner: app.uniqueName)
    var failure: (any Error)?
    do {
      try await body(
        Fixture(
          bluetoothd: bluetoothd, app: app, manager: manager, notifying: notifying,
          indicating: indicating, paths: paths))
    } catch {
      failure = error
    }
    await manager.close()
    app.close()
    bluetoothd.close()
    bus.stop()
    if let failure { throw failure }
  }

  static let a = Central(identifier: centralA)
  static let b = Central(identifier: centralB)

  @Test func perDeviceSocketsGiveExactSubscribersAndReachChosenCentralsOnly() async throws {
    try await Self.withFixture(BluetoothdVersion(5, 82)) { fixture in
      let manager = fixture.manager
      let socketA = try await fixture.acquire(Self.notifyUUID, for: Self.centralA)
      let socketB = try await fixture.acquire(Self.notifyUUID, for: Self.centralB)
      let subscribers = manager.subscribers(of: fixture.notifying)
      #expect(subscribers.known == [Self.a, Self.b])
      #expect(subscribers.isSubscribed && subscribers.isComplete)
      #expect(manager.notifiesCentralsIndividually(fixture.notifying))

      #expect(
        try manager.updateValue([1, 2], for: fixture.notifying, onSubscribedCentrals: [Self.a]))
      let received1 = await receive(socketA, waitMilliseconds: 2000)
      #expect(received1 == [1, 2])
      let received2 = await receive(socketB, waitMilliseconds: 200)
      #expect(received2 == [])

      try await manager.send([7], for: fixture.notifying, to: Self.b)
      let received3 = await receive(socketB, waitMilliseconds: 2000)
      #expect(received3 == [7])
      let received4 = await receive(socketA, waitMilliseconds: 200)
      #expect(received4 == [])

      // To all: each central through its own socket, once.
      #expect(try manager.updateValue([3], for: fixture.notifying))
      let received5 = await receive(socketA, waitMilliseconds: 2000)
      #expect(received5 == [3])
      let received6 = await receive(socketB, waitMilliseconds: 2000)
      #expect(received6 == [3])
      let received7 = await receive(socketA, waitMilliseconds: 100)
      #expect(received7 == [])

      // B leaves (bluetoothd closes its socket): A stays, and the list says so.
      _ = socketB.take().map { close($0) }
      let deadline = ContinuousClock.now + .seconds(5)
      while manager.subscribers(of: fixture.notifying).known.count == 2,
        ContinuousClock.now < deadline
      {
        try await Task.sleep(for: .milliseconds(10))
      }
      #expect(manager.subscribers(of: fixture.notifying).known == [Self.a])
      #expect(try manager.updateValue([4], for: fixture.notifying, onSubscribedCentrals: [Self.b]))
      let received8 = await receive(socketA, waitMilliseconds: 200)
      #expect(received8 == [])
      let gone = await #expect(throws: BluetoothError.self) {
        try await manager.send([5], for: fixture.notifying, to: Self.b)
      }
      #expect(gone?.code == .notSubscribed)
    }
  }

  @Test func perDeviceSocketsThatReachEveryCentralAreNotUsedToChoose() async throws {
    // 5.69 to 5.75: a socket per central, but each value written goes to all of them.
    try await Self.withFixture(BluetoothdVersion(5, 72)) { fixture in
      let manager = fixture.manager
      let socketA = try await fixture.acquire(Self.notifyUUID, for: Self.centralA)
      let socketB = try await fixture.acquire(Self.notifyUUID, for: Self.centralB)
      #expect(manager.subscribers(of: fixture.notifying).isComplete)
      #expect(!manager.notifiesCentralsIndividually(fixture.notifying))
      let error = #expect(throws: BluetoothError.self) {
        try manager.updateValue([1], for: fixture.notifying, onSubscribedCentrals: [Self.a])
      }
      #expect(error?.code == .notSupported)
      #expect(error?.message.contains("5.72") == true && error?.message.contains("5.76") == true)
      // To all: through one socket only, since bluetoothd passes it to every central.
      #expect(try manager.updateValue([3], for: fixture.notifying))
      let got = [
        await receive(socketA, waitMilliseconds: 1000),
        await receive(socketB, waitMilliseconds: 200),
      ]
      #expect(got.filter { $0 == [3] }.count == 1)
    }
  }

  @Test func oneSharedSocketKeepsTheRefusalAndAnIncompleteList() async throws {
    try await Self.withFixture(BluetoothdVersion(5, 66)) { fixture in
      let manager = fixture.manager
      // Kept open: closing bluetoothd's end is the central leaving.
      let socket = try await fixture.acquire(Self.notifyUUID, for: Self.centralA)
      defer { withExtendedLifetime(socket) {} }
      let subscribers = manager.subscribers(of: fixture.notifying)
      #expect(subscribers.known == [Self.a] && !subscribers.isComplete)
      let error = #expect(throws: BluetoothError.self) {
        try manager.updateValue([1], for: fixture.notifying, onSubscribedCentrals: [Self.a])
      }
      #expect(error?.code == .notSupported)
      #expect(error?.message.contains("bluetoothd 5.66") == true)
      #expect(error?.message.contains("5.69") == true)
    }
  }

  @Test func unknownVersionIsTreatedAsOneSharedSocket() async throws {
    try await Self.withFixture(nil) { fixture in
      let socket = try await fixture.acquire(Self.notifyUUID, for: Self.centralA)
      defer { withExtendedLifetime(socket) {} }
      #expect(fixture.manager.subscribers(of: fixture.notifying).isSubscribed)
      #expect(!fixture.manager.subscribers(of: fixture.notifying).isComplete)
      let error = #expect(throws: BluetoothError.self) {
        try fixture.manager.updateValue(
          [1], for: fixture.notifying, onSubscribedCentrals: [Self.a])
      }
      #expect(error?.message.contains("could not read bluetoothd's version") == true)
    }
  }

  @Test func indicationsGoThroughSocketsAndWaitForEveryCentralsConfirmation() async throws {
    try await Self.withFixture(BluetoothdVersion(5, 82)) { fixture in
      let manager = fixture.manager
      let socketA = try await fixture.acquire(Self.indicateUUID, for: Self.centralA)
      let socketB = try await fixture.acquire(Self.indicateUUID, for: Self.centralB)
      let confirmed = Flag()
      let indication = Task {
        try await manager.indicate([9, 9], for: fixture.indicating, timeout: .seconds(20))
        confirmed.set()
      }
      let received9 = await receive(socketA, waitMilliseconds: 2000)
      #expect(received9 == [9, 9])
      let received10 = await receive(socketB, waitMilliseconds: 2000)
      #expect(received10 == [9, 9])
      // A confirms (bluetoothd writes 0x01 to A's socket); B has not yet.
      #expect(write(socketA.rawValue, [1], 1) == 1)
      try await Task.sleep(for: .milliseconds(200))
      #expect(!confirmed.isSet)
      #expect(write(socketB.rawValue, [1], 1) == 1)
      try await indication.value

      // A central that leaves without confirming: the indication ends once the others did.
      let second = Task {
        try await manager.indicate([8], for: fixture.indicating, timeout: .seconds(20))
      }
      let received11 = await receive(socketA, waitMilliseconds: 2000)
      #expect(received11 == [8])
      let received12 = await receive(socketB, waitMilliseconds: 2000)
      #expect(received12 == [8])
      #expect(write(socketA.rawValue, [1], 1) == 1)
      _ = socketB.take().map { close($0) }
      try await second.value

      // Nobody confirms in time.
      let error = await #expect(throws: BluetoothError.self) {
        try await manager.indicate([7], for: fixture.indicating, timeout: .milliseconds(200))
      }
      #expect(error?.code == .notConfirmed)
    }
  }

  @Test func beforeSocketConfirmationsIndicationsKeepTheSignalPath() async throws {
    // 5.79 and earlier report no confirmation on the socket: no NotifyAcquired, so bluetoothd
    // uses StartNotify and Confirm.
    try await Self.withFixture(BluetoothdVersion(5, 79)) { fixture in
      await #expect(throws: (any Error).self) {
        _ = try await fixture.acquire(Self.indicateUUID, for: Self.centralA)
      }
      let error = #expect(throws: BluetoothError.self) {
        try fixture.manager.updateValue(
          [1], for: fixture.indicating, onSubscribedCentrals: [Self.a])
      }
      #expect(error?.message.contains("5.80") == true)
      // The notify characteristic still gets a socket per central.
      let socket = try await fixture.acquire(Self.notifyUUID, for: Self.centralA)
      defer { withExtendedLifetime(socket) {} }
      #expect(fixture.manager.subscribers(of: fixture.notifying).known == [Self.a])
      #expect(fixture.manager.notifiesCentralsIndividually(fixture.notifying))
    }
  }

  @Test func aTransferGoesWholeToEachCentralThroughItsOwnSocket() async throws {
    // advertise's TransferPeripheral on 5.82: a second subscriber gets its own copy and
    // does not restart (or receive a second copy of) the first one's.
    let bus = try PrivateBus()
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let app = try bus.connect()
    let manager = try await PeripheralManager.open(
      adapter: "hci0", connection: app,
      bluetoothd: BluetoothdFeatures(version: BluetoothdVersion(5, 82)))
    let message = (0..<6000).map { UInt8(truncatingIfNeeded: $0 * 7) }
    let transfer = TransferPeripheral(manager: manager, message: message, sequenced: false)
    try await manager.add(transfer.service)
    let served = transfer.serve()
    let consumer = Task { for await _ in served {} }
    let root = try #require(bluetoothd.registry.applications.withLock { Array($0.keys) }.first)
    let paths = try await bluetoothd.characteristics(of: root, owner: app.uniqueName)
    let fixture = Fixture(
      bluetoothd: bluetoothd, app: app, manager: manager,
      notifying: transfer.plainCharacteristic, indicating: transfer.plainCharacteristic,
      paths: paths)
    let plain = BlekitUUID.transferCharacteristic
    let socketA = try await fixture.acquire(plain, for: Self.centralA)
    var valuesA = [await receive(socketA, waitMilliseconds: 5000)]
    let socketB = try await fixture.acquire(plain, for: Self.centralB)
    func drain(_ socket: FileDescriptor, into values: inout [[UInt8]]) async {
      while values.last != Array("EOM".utf8) {
        let value = await receive(socket, waitMilliseconds: 5000)
        if value.isEmpty { break }
        values.append(value)
      }
    }
    await drain(socketA, into: &valuesA)
    var valuesB: [[UInt8]] = []
    await drain(socketB, into: &valuesB)
    #expect(valuesA.last == Array("EOM".utf8) && valuesB.last == Array("EOM".utf8))
    #expect(Array(valuesA.dropLast().joined()) == message)
    #expect(Array(valuesB.dropLast().joined()) == message)
    // Nothing more for either.
    let received13 = await receive(socketA, waitMilliseconds: 300)
    #expect(received13 == [])
    let received14 = await receive(socketB, waitMilliseconds: 100)
    #expect(received14 == [])
    consumer.cancel()
    await manager.close()
    app.close()
    bluetoothd.close()
    bus.stop()
  }

  /// One datagram from bluetoothd's end of the socket, or [] when none came in time (waiting
  /// off the cooperative pool's threads: TestSupport's `datagram(from:within:)`).
  private func receive(_ socket: FileDescriptor, waitMilliseconds: Int) async -> [UInt8] {
    await datagram(from: socket.rawValue, within: .milliseconds(waitMilliseconds))
  }
}

/// A flag set from another task.
private final class Flag: Sendable {
  private let value = Mutex(false)
  func set() { value.withLock { $0 = true } }
  var isSet: Bool { value.withLock { $0 } }
}
