import BlueZ
import DBus
import Foundation
import Synchronization
import TestSupport
import Testing

// Exploring a device with a value that needs encryption, unpaired (issue 39): bluetoothd
// answers the read with `org.bluez.Error.NotPermitted` "Not paired" (src/gatt-client.c, ATT
// 0x05/0x0c/0x0f), tries to raise the link's security, the pairing fails and the kernel
// drops the link. A stand-in org.bluez on a private bus plays that device: a Device1 whose
// Connect brings the link back, two services, and a secure characteristic whose read drops
// the link. The exploration connects again, marks the value and finishes the dump.
@testable import BLEKit

/// The stand-in device: 00:AA:01:01:00:01 on hci0.
final class SecureValueDevice: Sendable {
  static let address = "00:AA:01:01:00:01"
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let first = device.appending("service000a")
  static let second = device.appending("service0010")
  /// Device Name (2a00): "sensor".
  static let name = first.appending("char000b")
  /// A vendor characteristic that needs encryption.
  static let secure = first.appending("char000d")
  static let secureUUID = "12345678-0000-1000-8000-00805f9b34fb"
  /// Its User Description (2901): "secret".
  static let secureDescription = secure.appending("desc000f")
  /// Battery Level (2a19): 0x5a.
  static let battery = second.appending("char0011")
  /// With `twoSecure`: a second value that needs encryption, after the battery level.
  static let secondSecure = second.appending("char0013")

  /// How the secure read fails.
  enum Refusal: Sendable {
    /// The link drops (the failed pairing) and the read gets bluetoothd's "Not paired"
    /// answer, the signal first: whether the drop comes before or after the answer, the
    /// exploration sees the link gone once it asks.
    case dropThenNotPaired
    /// The link drops first and the read gets bluetoothd's bare "Operation failed" (ATT
    /// error 0 after a disconnection): the exploration cannot tell why.
    case dropThenFailed
    /// bluetoothd's bare "Operation failed" while the link is still up (the security change
    /// failed), and the kernel's disconnection 300 ms later.
    case failedThenDrop
    /// The link drops and the read is never answered (bluetoothd 5.66 leaves calls pending
    /// at a drop unanswered, as the lab saw with AcquireNotify).
    case dropThenSilent
    /// The link drops and the read is never answered, and bluetoothd refuses every later
    /// read of it with InProgress (bluetoothd 5.82 keeps the read it retried with raised
    /// security pending after that pairing failed and the link dropped: the quirks lab suite
    /// on Debian 13).
    case dropThenSilentThenInProgress
    /// The link drops and the read is never answered, and neither is the read on the new link,
    /// which stays up (bluetoothd 5.82 on Debian 13, the quirks lab suite of 2026-12-07: the
    /// retry waited out the 40 s GATT call limit).
    case dropThenSilentThenHeld
    /// An empty value, and the disconnection 100 ms later: bluetoothd 5.66's answer to a
    /// read that the link's loss ended.
    case emptyThenDrop
  }

  /// What the stand-in holds and counts.
  final class State: Sendable {
    let connected = Mutex(false)
    /// Device1.Connect calls.
    let connects = Mutex(0)
    /// ReadValue calls on the secure characteristic.
    let secureReads = Mutex(0)
  }

  let connection: DBusConnection
  let refusal: Refusal
  let state = State()
  var connects: Int { state.connects.withLock { $0 } }
  var secureReads: Int { state.secureReads.withLock { $0 } }

  init(bus: PrivateBus, refusal: Refusal, connected: Bool, twoSecure: Bool = false)
    async throws
  {
    self.refusal = refusal
    let state = self.state
    state.connected.withLock { $0 = connected }
    let objects = try await FakeBlueZObjects(bus: bus)
    connection = objects.connection
    try objects.exportAdapter("hci0", powered: true)
    let connection = self.connection
    let setLink = { @Sendable (up: Bool) throws in
      state.connected.withLock { $0 = up }
      try connection.emitPropertiesChanged(
        path: Self.device, interface: Device1.interface,
        changed: ["Connected": .bool(up), "ServicesResolved": .bool(up)])
    }
    let device = ExportedInterface(
      name: Device1.interface,
      methods: [
        ExportedMethod(name: "Connect", inSignature: "", outSignature: "") { _ in
          state.connects.withLock { $0 += 1 }
          try setLink(true)
          return []
        },
        ExportedMethod(name: "Disconnect", inSignature: "", outSignature: "") { _ in
          try setLink(false)
          return []
        },
      ],
      properties: [
        ExportedProperty(name: "Address", signature: "s", access: .read) {
          .string(Self.address)
        },
        ExportedProperty(name: "Adapter", signature: "o", access: .read) {
          .objectPath("/org/bluez/hci0")
        },
        ExportedProperty(name: "Name", signature: "s", access: .read) { .string("sensor") },
        ExportedProperty(name: "Connected", signature: "b", access: .read) {
          .bool(state.connected.withLock { $0 })
        },
        ExportedProperty(name: "ServicesResolved", signature: "b", access: .read) {
          .bool(state.connected.withLock { $0 })
        },
      ])
    try connection.export(ExportedObject(interfaces: [device]), at: Self.device)
    for (path, uuid) in [
      (Self.first, "00001800-0000-1000-8000-00805f9b34fb"),
      (Self.second, "0000180f-0000-1000-8000-00805f9b34fb"),
    ] {
      try connection.export(
        ExportedObject(interfaces: [
          FakeBlueZObjects.interface(
            GattService1.interface,
            ["UUID": .string(uuid), "Device": .objectPath(Self.device), "Primary": .bool(true)])
        ]), at: path)
    }
    // A read on a dropped link: bluetoothd's answer when it has no GATT client.
    let notConnected = DBusError.remote(name: "org.bluez.Error.Failed", message: "Not connected")
    func readable(
      _ path: ObjectPath, service: ObjectPath, uuid: String, flags: [String],
      read: @escaping @Sendable () async throws -> [UInt8]
    ) throws {
      var interface = FakeBlueZObjects.interface(
        GattCharacteristic1.interface,
        [
          "UUID": .string(uuid), "Service": .objectPath(service), "Flags": .strings(flags),
          "MTU": .uint16(517),
        ])
      interface.methods.append(
        ExportedMethod(name: "ReadValue", inSignature: "a{sv}", outSignature: "ay") { _ in
          guard state.connected.withLock({ $0 }) else { throw notConnected }
          return [.bytes(try await read())]
        })
      try connection.export(ExportedObject(interfaces: [interface]), at: path)
    }
    try readable(
      Self.name, service: Self.first, uuid: "00002a00-0000-1000-8000-00805f9b34fb",
      flags: ["read"]
    ) { Array("sensor".utf8) }
    let refuse = { @Sendable () async throws -> [UInt8] in
      state.secureReads.withLock { $0 += 1 }
      switch refusal {
      case .dropThenNotPaired:
        // The kernel drops the link once the pairing bluetoothd started has failed.
        try setLink(false)
        throw DBusError.remote(name: "org.bluez.Error.NotPermitted", message: "Not paired")
      case .dropThenFailed:
        try setLink(false)
        throw DBusError.remote(name: "org.bluez.Error.Failed", message: "Operation failed")
      case .emptyThenDrop:
        Task {
          try? await Task.sleep(for: .milliseconds(100))
          try? setLink(false)
        }
        return []
      case .dropThenSilentThenInProgress where state.secureReads.withLock({ $0 }) > 1:
        throw DBusError.remote(name: "org.bluez.Error.InProgress", message: "In Progress")
      case .dropThenSilentThenHeld where state.secureReads.withLock({ $0 }) > 1:
        try await Task.sleep(for: .seconds(300))
        throw DBusError.remote(name: "org.bluez.Error.Failed", message: "never answered")
      case .dropThenSilent, .dropThenSilentThenInProgress, .dropThenSilentThenHeld:
        try setLink(false)
        try await Task.sleep(for: .seconds(300))
        throw DBusError.remote(name: "org.bluez.Error.Failed", message: "never answered")
      case .failedThenDrop:
        // On a queue, not a task: a full `swift test` run keeps the cooperative pool busy
        // enough that a sleeping task dropped the link after explore's 2 s settle time (one
        // full run saw no drop).
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) {
          try? setLink(false)
        }
        throw DBusError.remote(name: "org.bluez.Error.Failed", message: "Operation failed")
      }
    }
    try readable(
      Self.secure, service: Self.first, uuid: Self.secureUUID, flags: ["read", "notify"],
      read: refuse)
    var description = FakeBlueZObjects.interface(
      GattDescriptor1.interface,
      [
        "UUID": .string("00002901-0000-1000-8000-00805f9b34fb"),
        "Characteristic": .objectPath(Self.secure),
      ])
    description.methods.append(
      ExportedMethod(name: "ReadValue", inSignature: "a{sv}", outSignature: "ay") { _ in
        guard state.connected.withLock({ $0 }) else { throw notConnected }
        return [.bytes(Array("secret".utf8))]
      })
    try connection.export(ExportedObject(interfaces: [description]), at: Self.secureDescription)
    try readable(
      Self.battery, service: Self.second, uuid: "00002a19-0000-1000-8000-00805f9b34fb",
      flags: ["read"]
    ) { [0x5A] }
    if twoSecure {
      try readable(
        Self.secondSecure, service: Self.second, uuid: "12345679-0000-1000-8000-00805f9b34fb",
        flags: ["read"], read: refuse)
    }
  }

  func close() { connection.close() }
}

@Suite(.timeLimit(.minutes(1)))
struct ExploreSecureValueTests {
  static let allowance = ExplorationReconnects(maximum: 3, timeout: .seconds(10))

  /// The explored tree's reads by characteristic path, descriptors included.
  static func reads(_ tree: [ExploredService]) -> [String: AttributeReadResult] {
    var reads: [String: AttributeReadResult] = [:]
    for item in tree.flatMap(\.characteristics) {
      reads[item.characteristic.path.rawValue] = item.read
      for descriptor in item.descriptors {
        reads[descriptor.descriptor.path.rawValue] = descriptor.read
      }
    }
    return reads
  }

  @Test func aValueThatNeedsPairingIsMarkedAndTheWalkGoesOn() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(
      bus: bus, refusal: .dropThenNotPaired, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let reads = Self.reads(tree)
    #expect(tree.map(\.characteristics.count) == [2, 1])
    #expect(reads[SecureValueDevice.name.rawValue] == .value(Array("sensor".utf8)))
    #expect(reads[SecureValueDevice.secureDescription.rawValue] == .value(Array("secret".utf8)))
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    guard case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] else {
      Issue.record(
        "the secure value: \(String(describing: reads[SecureValueDevice.secure.rawValue]))")
      await central.close()
      return
    }
    #expect(failure.requirement == .pairing)
    #expect(failure.errorName == "org.bluez.Error.NotPermitted")
    // Asked once: a second read would only start the failing pairing again.
    #expect(device.secureReads == 1)
    #expect(device.connects == 1)
    await central.close()
  }

  @Test func withoutReconnectsADroppedLinkStillEndsTheWalk() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .dropThenFailed, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    do throws(BluetoothError) {
      _ = try await peripheral.explore(reads: .all)
      Issue.record("the exploration ended without an error")
    } catch {
      #expect(error.code == .disconnected)
    }
    #expect(device.connects == 0)
    await central.close()
  }

  @Test func aReadThatDropsTheLinkTwiceIsMarkedAndTheRestIsRead() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .dropThenFailed, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    #expect(reads[SecureValueDevice.secureDescription.rawValue] == .value(Array("secret".utf8)))
    guard case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] else {
      Issue.record("the secure value was read")
      await central.close()
      return
    }
    #expect(failure.droppedLink)
    #expect(failure.requirement == nil)
    // Tried once more after connecting again, then given up.
    #expect(device.secureReads == 2)
    #expect(device.connects == 2)
    await central.close()
  }

  @Test func aFailureTheLinkDropsRightAfterCountsAsADrop() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .failedThenDrop, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    guard case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] else {
      Issue.record("the secure value was read")
      await central.close()
      return
    }
    #expect(failure.droppedLink)
    // Tried again after the drop, which came again.
    #expect(device.secureReads == 2)
    #expect(device.connects == 2)
    await central.close()
  }

  @Test func afterAReadDroppedTheLinkTwiceLaterDropsAreNotTriedAgain() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(
      bus: bus, refusal: .dropThenFailed, connected: true, twoSecure: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    // Three reconnects: two for the first value (the drop, then the drop of its second
    // read), one for the second value, read once.
    let tree = try await peripheral.explore(
      reads: .all, reconnects: ExplorationReconnects(maximum: 3, timeout: .seconds(10)))
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    for path in [SecureValueDevice.secure, SecureValueDevice.secondSecure] {
      guard case .failed(let failure)? = reads[path.rawValue] else {
        Issue.record("\(path) was read")
        continue
      }
      #expect(failure.droppedLink)
    }
    #expect(device.secureReads == 3)
    #expect(device.connects == 3)
    await central.close()
  }

  @Test func aReadLeftUnansweredAtADropIsGivenUpSoon() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .dropThenSilent, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let started = ContinuousClock.now
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let elapsed = ContinuousClock.now - started
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    guard case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] else {
      Issue.record("the secure value was read")
      await central.close()
      return
    }
    #expect(failure.droppedLink)
    #expect(failure.message.contains("before the read was answered"))
    #expect(device.secureReads == 2)
    // Two reads given up 2 s after their drops, not after the call's 40 s.
    #expect(elapsed < .seconds(15), "took \(elapsed)")
    await central.close()
  }

  /// Explores the stand-in refusing as `refusal` with the reconnects allowed: the drop's
  /// failure must stand for the secure value (not the retry's answer), read twice, and the
  /// battery level must be read after it.
  static func expectTheDropStands(_ refusal: SecureValueDevice.Refusal) async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: refusal, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    if case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] {
      #expect(failure.droppedLink)
      #expect(failure.message.contains("before the read was answered"), "\(failure)")
    } else {
      Issue.record("the secure value was read")
    }
    #expect(device.secureReads == 2)
    await central.close()
  }

  /// bluetoothd's InProgress for the read it still holds is the drop's answer.
  @Test func inProgressAfterAnUnansweredDropIsThatDrop() async throws {
    try await Self.expectTheDropStands(.dropThenSilentThenInProgress)
  }

  @Test func anEmptyValueTheLinkDropsRightAfterIsNoValue() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .emptyThenDrop, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let tree = try await peripheral.explore(reads: .all, reconnects: Self.allowance)
    let reads = Self.reads(tree)
    #expect(reads[SecureValueDevice.battery.rawValue] == .value([0x5A]))
    guard case .failed(let failure)? = reads[SecureValueDevice.secure.rawValue] else {
      Issue.record(
        "the secure value: \(String(describing: reads[SecureValueDevice.secure.rawValue]))")
      await central.close()
      return
    }
    #expect(failure.droppedLink)
    #expect(device.secureReads == 2)
    #expect(device.connects == 2)
    await central.close()
  }

  @Test func reconnectsAreBounded() async throws {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let device = try await SecureValueDevice(bus: bus, refusal: .dropThenFailed, connected: true)
    defer { device.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress(SecureValueDevice.address)))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    do throws(BluetoothError) {
      _ = try await peripheral.explore(
        reads: .all, reconnects: ExplorationReconnects(maximum: 1, timeout: .seconds(10)))
      Issue.record("the exploration ended without an error")
    } catch {
      #expect(error.code == .disconnected)
    }
    #expect(device.connects == 1)
    await central.close()
  }

  @Test func requirementsFromBluetoothdsErrors() {
    func requirement(_ name: String?, _ message: String) -> AttributeAccessRequirement? {
      AttributeReadFailure(errorName: name, message: message).requirement
    }
    #expect(requirement("org.bluez.Error.NotPermitted", "Not paired") == .pairing)
    #expect(requirement("org.bluez.Error.NotPermitted", "Read not permitted") == nil)
    #expect(
      requirement("org.bluez.Error.NotAuthorized", "Operation Not Authorized") == .authorization)
    #expect(
      requirement("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0f") == .pairing)
    #expect(
      requirement("org.bluez.Error.Failed", "Operation failed with ATT error: 0x05") == .pairing)
    #expect(
      requirement("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0c") == .pairing)
    #expect(
      requirement("org.bluez.Error.Failed", "Operation failed with ATT error: 0x08")
        == .authorization)
    #expect(requirement("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0e") == nil)
    #expect(requirement("org.bluez.Error.Failed", "Operation failed") == nil)
  }
}

/// A read bluetoothd still holds after a drop, met again on the new link: a test of its own, as
/// it waits out the GATT call limit (40 s).
@Suite(.timeLimit(.minutes(2)))
struct ExploreHeldReadTests {
  @Test func aRetryThatWaitsOutTheCallLimitAfterAnUnansweredDropIsThatDrop() async throws {
    try await ExploreSecureValueTests.expectTheDropStands(.dropThenSilentThenHeld)
  }

}

/// `blekit explore` against the stand-in, as a user runs it.
@Suite(
  .enabled(if: builtBlekit != nil, "the blekit executable was not built"),
  .timeLimit(.minutes(1)))
struct ExploreSecureValueCLITests {
  @Test func exploreFinishesTheDumpMarksTheValueAndExitsFive() async throws {
    let bus = try PrivateBus(name: "cli")
    defer { bus.stop() }
    let device = try await SecureValueDevice(
      bus: bus, refusal: .dropThenNotPaired, connected: false)
    defer { device.close() }
    let blekit = try BlekitProcess(
      ["explore", SecureValueDevice.address, "-a", "hci0", "--timeout", "10"], bus: bus)
    let status = await blekit.exitStatus(within: .seconds(40))
    let output = blekit.standardOutput
    #expect(status == 5, "stdout: \(output)\nstderr: \(blekit.standardError)")
    let lines = output.split(separator: "\n").map(String.init)
    // The other services' values are there.
    #expect(lines.contains { $0.contains("\"sensor\"") })
    #expect(lines.contains { $0.contains("\"secret\"") })
    #expect(lines.contains("    value  5a  \"Z\""))
    #expect(
      lines.contains {
        $0.hasPrefix("    error  needs encryption: pair first (blekit pair 00:AA:01:01:00:01)")
      })
    #expect(
      lines.last == "1 value not read: 1 needs pairing first (blekit pair 00:AA:01:01:00:01)")
    #expect(blekit.standardError.contains("1 value not read"))
  }

  @Test func jsonMarksTheValue() async throws {
    let bus = try PrivateBus(name: "cli")
    defer { bus.stop() }
    let device = try await SecureValueDevice(
      bus: bus, refusal: .dropThenNotPaired, connected: false)
    defer { device.close() }
    let blekit = try BlekitProcess(
      ["explore", SecureValueDevice.address, "-a", "hci0", "--timeout", "10", "--json"],
      bus: bus)
    let status = await blekit.exitStatus(within: .seconds(40))
    #expect(status == 5, "stderr: \(blekit.standardError)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(blekit.standardOutput.utf8)) as? [String: Any])
    #expect(object["unread"] as? Int == 1)
    let services = try #require(object["services"] as? [[String: Any]])
    let characteristics = services.flatMap { ($0["characteristics"] as? [[String: Any]]) ?? [] }
    let secure = try #require(
      characteristics.first { $0["uuid"] as? String == SecureValueDevice.secureUUID })
    #expect(secure["needs"] as? String == "pairing")
    #expect((secure["error"] as? [String: Any])?["droppedLink"] is Bool)
    let battery = try #require(characteristics.first { $0["shortUUID"] as? String == "2a19" })
    #expect(battery["value"] as? String == "5a")
    #expect(battery["needs"] is NSNull)
  }
}
