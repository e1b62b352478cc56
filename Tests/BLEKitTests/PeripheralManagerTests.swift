import BlueZ
import Bluetooth
import DBus
import Foundation
import Synchronization
// PeripheralManager against a fake bluetoothd on a private bus: reads with offsets, writes,
// the caller check, AcquireNotify with back-pressure, advertising, and cleanup.
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1)), .serialized)
struct PeripheralManagerTests {
  static let serviceUUID = BluetoothUUID(uint16: 0xFFF0)
  static let readableUUID = BluetoothUUID(uint16: 0xFFF1)
  static let notifyUUID = BluetoothUUID(uint16: 0xFFF2)
  static let readable = "Hello, world"

  /// A bus, a fake bluetoothd, a manager with one service of two characteristics.
  struct Fixture {
    let bus: PrivateBus
    let bluetoothd: FakeBluetoothd
    let appConnection: DBusConnection
    let manager: PeripheralManager
    let notifying: MutableCharacteristic
    let paths: [String: ObjectPath]

    var owner: BusName { appConnection.uniqueName }

    func path(_ uuid: BluetoothUUID) -> ObjectPath { paths[uuid.uuidString.lowercased()]! }

    func tearDown() async {
      await manager.close()
      appConnection.close()
      bluetoothd.close()
      bus.stop()
    }
  }

  /// Runs `body` with a fresh fixture, tearing it down afterwards.
  static func withFixture(_ body: (Fixture) async throws -> Void) async throws {
    let fixture = try await makeFixture()
    do {
      try await body(fixture)
    } catch {
      await fixture.tearDown()
      throw error
    }
    await fixture.tearDown()
  }

  static func makeFixture() async throws -> Fixture {
    let bus = try PrivateBus()
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    let appConnection = try bus.connect()
    let manager = try await PeripheralManager.open(adapter: "hci0", connection: appConnection)
    let readable = MutableCharacteristic(
      type: readableUUID, properties: [.read], permissions: [.readable],
      onRead: { _ in Array(Self.readable.utf8) })
    let notifying = MutableCharacteristic(
      type: notifyUUID, properties: [.notify, .writeWithoutResponse],
      permissions: [.writeable])
    try await manager.add(
      MutableService(type: serviceUUID, characteristics: [readable, notifying]))
    let root = try #require(bluetoothd.registry.applications.withLock { Array($0.keys) }.first)
    let paths = try await bluetoothd.characteristics(of: root, owner: appConnection.uniqueName)
    return Fixture(
      bus: bus, bluetoothd: bluetoothd, appConnection: appConnection, manager: manager,
      notifying: notifying, paths: paths)
  }

  @Test func removeAllServicesAndIsAdvertisingFollowBluetoothd() async throws {
    try await Self.withFixture { fixture in
      let manager = fixture.manager
      #expect(manager.isAdvertising == false)
      try await manager.startAdvertising(AdvertisingPayload(serviceUUIDs: [Self.serviceUUID]))
      #expect(manager.isAdvertising)
      #expect(fixture.bluetoothd.registry.advertisements.withLock { $0.count } == 1)
      await manager.stopAdvertising()
      #expect(manager.isAdvertising == false)
      #expect(fixture.bluetoothd.registry.advertisements.withLock { $0.count } == 0)
      // The fixture published one service; a second, then both withdrawn at once.
      try await manager.add(
        MutableService(type: BluetoothUUID(uint16: 0x180F), characteristics: []))
      #expect(fixture.bluetoothd.registry.applications.withLock { $0.count } == 2)
      await manager.removeAllServices()
      #expect(fixture.bluetoothd.registry.applications.withLock { $0.count } == 0)
    }
  }

  @Test func readsHonourTheOffset() async throws {
    try await Self.withFixture { fixture in
      let path = fixture.path(Self.readableUUID)
      func read(_ offset: UInt16) async throws -> [UInt8]? {
        try await fixture.bluetoothd.callCharacteristic(
          "ReadValue", on: path, owner: fixture.owner,
          arguments: [.dictionaryOfVariants(["offset": .uint16(offset)])]
        ).first?.bytesValue
      }
      let whole = try await read(0)
      let tail = try await read(7)
      let atEnd = try await read(12)
      #expect(whole == Array(Self.readable.utf8))
      #expect(tail == Array("world".utf8))
      #expect(atEnd == [])
      let error = await #expect(throws: DBusError.self) { try await read(13) }
      #expect(error?.name == "org.bluez.Error.InvalidOffset")
    }
  }

  @Test func strangersAreRefused() async throws {
    try await Self.withFixture { fixture in
      let stranger = try fixture.bus.connect()
      defer { stranger.close() }
      for (member, arguments) in [
        ("ReadValue", [DBusValue.dictionaryOfVariants([:])]),
        ("WriteValue", [.bytes([1]), .dictionaryOfVariants([:])]),
        ("StartNotify", []),
        ("AcquireNotify", [.dictionaryOfVariants([:])]),
      ] as [(MemberName, [DBusValue])] {
        let path = fixture.path(member == "ReadValue" ? Self.readableUUID : Self.notifyUUID)
        let error = await #expect(throws: DBusError.self) {
          try await fixture.bluetoothd.callCharacteristic(
            member, on: path, owner: fixture.owner, arguments: arguments, from: stranger)
        }
        #expect(error?.name == "org.bluez.Error.NotAuthorized", "\(member)")
      }
    }
  }

  @Test func writesArriveAsEvents() async throws {
    try await Self.withFixture { fixture in
      _ = try await fixture.bluetoothd.callCharacteristic(
        "WriteValue", on: fixture.path(Self.notifyUUID), owner: fixture.owner,
        arguments: [
          .bytes(Array("reply".utf8)), .dictionaryOfVariants(["type": .string("command")]),
        ])
      for await event in fixture.manager.events {
        guard case .write(let request) = event else { continue }
        #expect(request.value == Array("reply".utf8))
        #expect(request.withoutResponse)
        #expect(request.characteristic == Self.notifyUUID)
        break
      }
    }
  }

  /// The heart of CoreBluetooth's contract: updateValue says "full" instead of dropping, and
  /// readyToUpdate follows once bluetoothd reads; values arrive whole and in order.
  @Test func acquiredSocketHasBackPressure() async throws {
    try await Self.withFixture { fixture in
      let manager = fixture.manager
      let reply = try await fixture.bluetoothd.callCharacteristic(
        "AcquireNotify", on: fixture.path(Self.notifyUUID), owner: fixture.owner,
        arguments: [.dictionaryOfVariants(["mtu": .uint16(100)])])
      let socket = try #require(reply.first?.fileDescriptorValue)
      #expect(reply.last?.uint16Value == 100)
      var events = manager.events.makeAsyncIterator()
      guard case .subscribed(_, let characteristic) = await events.next() else {
        Issue.record("no subscription event")
        return
      }
      #expect(characteristic === fixture.notifying)
      #expect(manager.maximumUpdateValueLength(for: fixture.notifying) == 97)
      let tooLong = #expect(throws: BluetoothError.self) {
        try manager.updateValue([UInt8](repeating: 0, count: 98), for: fixture.notifying)
      }
      #expect(tooLong?.code == .valueTooLong)

      // Fill the socket without reading: it must say "full", not drop.
      var sent = 0
      while try manager.updateValue(value(sent), for: fixture.notifying) {
        sent += 1
        #expect(sent < 100_000, "the socket never filled")
        if sent >= 100_000 { return }
      }
      #expect(sent > 0)
      // bluetoothd drains the socket: room again (AF_UNIX reports room only once most of the
      // queue is read), and every value arrives whole and in order.
      var received: [[UInt8]] = []
      while case let datagram = await receive(socket, waitMilliseconds: 0), !datagram.isEmpty {
        received.append(datagram)
      }
      #expect(received.count == sent)
      #expect(received == (0..<sent).map(value))
      var ready = false
      while let event = await events.next() {
        if case .readyToUpdate = event {
          ready = true
          break
        }
      }
      #expect(ready)
      #expect(try manager.updateValue(value(sent), for: fixture.notifying))
      let arrived = await receive(socket, waitMilliseconds: 5000)
      #expect(arrived == value(sent))

      // bluetoothd hangs up: unsubscribed, and send() refuses.
      _ = socket.take().map { close($0) }
      var unsubscribed = false
      while let event = await events.next() {
        if case .unsubscribed = event {
          unsubscribed = true
          break
        }
      }
      #expect(unsubscribed)
      let unheard = await #expect(throws: BluetoothError.self) {
        try await manager.send([1], for: fixture.notifying)
      }
      #expect(unheard?.code == .notSubscribed)
    }
  }

  @Test func advertisingAndCloseLeaveNothing() async throws {
    let fixture = try await Self.makeFixture()
    let manager = fixture.manager
    try await manager.startAdvertising(
      AdvertisingPayload(serviceUUIDs: [Self.serviceUUID], localName: "blekit"))
    let registered = fixture.bluetoothd.registry.advertisements.withLock { $0 }
    #expect(registered.count == 1)
    let properties = try #require(registered.values.first)
    #expect(properties["Type"]?.stringValue == "peripheral")
    #expect(properties["ServiceUUIDs"]?.stringArrayValue == [Self.serviceUUID.uuidString])
    #expect(properties["LocalName"]?.stringValue == "blekit")

    // Too large: refused before bluetoothd sees it, naming the fields.
    let tooLarge = AdvertisingPayload(
      serviceUUIDs: [BlekitUUID.transferService], manufacturerData: [0xFFFF: Array(0..<22)])
    let error = await #expect(throws: BluetoothError.self) {
      try await manager.startAdvertising(tooLarge)
    }
    #expect(error.map { "\($0)".contains("manufacturer data") } == true)
    #expect(error?.code == .advertisementTooLarge)

    await manager.close()
    #expect(fixture.bluetoothd.registry.applications.withLock { $0.isEmpty })
    #expect(fixture.bluetoothd.registry.advertisements.withLock { $0.isEmpty })
    await fixture.tearDown()
  }

  @Test func supervisionEndsWhenTheBusIsLost() async throws {
    let fixture = try await Self.makeFixture()
    let manager = fixture.manager
    try await manager.startAdvertising(AdvertisingPayload(serviceUUIDs: [Self.serviceUUID]))
    let supervision = try await manager.supervise(returnWithin: .seconds(30))
    fixture.bus.stop()  // dbus-daemon dies
    // What `advertise` follows: one event saying so, then the end (not a 30 s wait for a
    // bluetoothd that cannot come back on this connection).
    let events = await within(.seconds(5)) { () -> [BluetoothdInterruption] in
      var all: [BluetoothdInterruption] = []
      for await event in supervision { all.append(event) }
      return all
    }
    #expect(events.value == [.busLost])
    // Closing afterwards does not wait for the bus either.
    let closed = await within(.seconds(5)) { await manager.close() }
    #expect(closed.value != nil)
    await fixture.tearDown()
  }

  /// Power-off signals in a burst (bluetoothd's, or a flood of them) lead to one look at the
  /// adapter after the grace, as the manager's tree holds it then: back on by then, the
  /// supervision goes on silently; off for good, one power-off ends it.
  @Test func powerOffsInABurstAreCheckedOnceAfterTheGrace() async throws {
    let fixture = try await Self.makeFixture()
    let supervision = try await fixture.manager.supervise(
      returnWithin: .seconds(30), powerOffGrace: .milliseconds(500))
    for _ in 0..<20 { try fixture.bluetoothd.setPowered(false) }
    try fixture.bluetoothd.setPowered(true)
    let collected = Task { () -> [BluetoothdInterruption] in
      var all: [BluetoothdInterruption] = []
      for await event in supervision { all.append(event) }
      return all
    }
    try await Task.sleep(for: .seconds(2))
    try fixture.bluetoothd.setPowered(false)
    let events = await within(.seconds(5), collected)
    #expect(events.value == [.adapterPoweredOff])
    await fixture.tearDown()
  }

  /// bluetoothd restarts with the adapter still off and switches it on a second later: the
  /// supervision waits for the tree to report `Powered` (it does not poll the adapter: only
  /// the tree's snapshot reads it), then registers the service
  /// and the advertisement with the new bluetoothd, whose calls the caller check admits.
  @Test func aReturningBluetoothdGetsEverythingOnceItsAdapterIsPowered() async throws {
    let fixture = try await Self.makeFixture()
    let manager = fixture.manager
    try await manager.startAdvertising(AdvertisingPayload(serviceUUIDs: [Self.serviceUUID]))
    let supervision = try await manager.supervise(returnWithin: .seconds(20))
    let seen = Mutex<[BluetoothdInterruption]>([])
    let follower = Task {
      for await event in supervision { seen.withLock { $0.append(event) } }
    }
    defer { follower.cancel() }
    fixture.bluetoothd.close()  // bluetoothd exits
    #expect(await eventually { seen.withLock { $0 } == [.stopped(waitingUpTo: .seconds(20))] })
    let second = try await FakeBluetoothd(bus: fixture.bus, powered: false)
    defer { second.close() }
    // Its export already read the adapter's properties once (InterfacesAdded).
    let readsBefore = second.registry.poweredReads.withLock { $0 }
    try await Task.sleep(for: .seconds(1))
    #expect(seen.withLock { $0.count } == 1)
    #expect(second.registry.applications.withLock { $0.isEmpty })
    try second.setPowered(true)
    #expect(await eventually { seen.withLock { $0.last } == .resumed })
    #expect(second.registry.applications.withLock { $0.count } == 1)
    #expect(second.registry.advertisements.withLock { $0.count } == 1)
    // At most the tree's snapshot read it since (a poll every 250 ms would have read it 4
    // times or more during the second it was off).
    let reads = second.registry.poweredReads.withLock { $0 } - readsBefore
    #expect(reads <= 1, "the returned bluetoothd's adapter was read \(reads) more times")
    await manager.close()
    fixture.appConnection.close()
    fixture.bus.stop()
  }

  /// Ctrl-C cancels a command's task, then it undoes its registrations: from the cancelled
  /// task, stopping the advertisement and removing the service still reach bluetoothd.
  @Test func undoingFromACancelledTaskReachesBluetoothd() async throws {
    let fixture = try await Self.makeFixture()
    let manager = fixture.manager
    let service = MutableService(
      type: Self.serviceUUID,
      characteristics: [
        MutableCharacteristic(
          type: BlekitUUID.transferCharacteristic, properties: [.notify], permissions: [])
      ])
    try await manager.add(service)
    try await manager.startAdvertising(AdvertisingPayload(serviceUUIDs: [Self.serviceUUID]))
    // The fixture's own service, and this one.
    #expect(fixture.bluetoothd.registry.applications.withLock { $0.count } == 2)
    #expect(fixture.bluetoothd.registry.advertisements.withLock { $0.count } == 1)
    await Task {
      withUnsafeCurrentTask { $0?.cancel() }
      await manager.stopAdvertising()
      await manager.remove(service)
    }.value
    #expect(fixture.bluetoothd.registry.advertisements.withLock { $0.isEmpty })
    #expect(fixture.bluetoothd.registry.applications.withLock { $0.count } == 1)
    await manager.close()
    await fixture.tearDown()
  }

  private func value(_ index: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 97)
    bytes[0] = UInt8(truncatingIfNeeded: index >> 8)
    return bytes
  }

  /// One datagram from bluetoothd's end of the socket, or [] when none came in time (waiting
  /// off the cooperative pool's threads: TestSupport's `datagram(from:within:)`).
  private func receive(_ socket: FileDescriptor, waitMilliseconds: Int) async -> [UInt8] {
    await datagram(from: socket.rawValue, within: .milliseconds(waitMilliseconds))
  }
}
