// Passive scans against a stand-in for bluetoothd on a private bus: the monitor registered
// and read back as bluetoothd reads it, Activate before the start returns, only the devices
// bluetoothd calls DeviceFound for, UnregisterMonitor at the stop, never a discovery session;
// and the refusal without the monitor interface or when bluetoothd releases the monitor.
import BlueZ
import Bluetooth
import DBus
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

/// A fake org.bluez whose hci0 offers AdvertisementMonitorManager1 (as bluetoothd -E does).
/// On RegisterMonitor it reads the client's monitors (GetManagedObjects), then activates them,
/// or releases them when `releaseInstead` is set.
final class FakeMonitoringBlueZ: Sendable {
  final class Record: Sendable {
    let calls = Mutex<[String]>([])
    /// The client and root of the registered monitors, and what GetManagedObjects gave.
    let client = Mutex<(BusName, ObjectPath)?>(nil)
    let monitors = Mutex<[ObjectPath: [String: DBusValue]]>([:])
    let releaseInstead = Mutex(false)
  }
  let connection: DBusConnection
  let record = Record()
  static let adapter: ObjectPath = "/org/bluez/hci0"

  init(bus: ClientTestBus, monitorManager: Bool = true) async throws {
    connection = try bus.connect()
    try connection.addObjectManager(at: "/")
    let record = self.record
    let connection = self.connection
    let constant = { (name: String, value: DBusValue) in
      ExportedProperty(name: name, signature: value.signature, access: .read) { value }
    }
    let recorded = { (name: MemberName, signature: Signature) in
      ExportedMethod(name: name, inSignature: signature, outSignature: "") { _ in
        record.calls.withLock { $0.append(name.rawValue) }
        return []
      }
    }
    var interfaces = [
      ExportedInterface(
        name: Adapter1.interface,
        methods: [
          recorded("SetDiscoveryFilter", "a{sv}"), recorded("StartDiscovery", ""),
          recorded("StopDiscovery", ""),
        ],
        properties: [
          constant("Address", .string("00:AA:01:00:00:00")),
          constant("Discovering", .bool(false)), constant("Powered", .bool(true)),
        ])
    ]
    if monitorManager {
      let register = ExportedMethod(
        name: "RegisterMonitor", inSignature: "o", outSignature: ""
      ) { invocation in
        record.calls.withLock { $0.append("RegisterMonitor") }
        guard let root = invocation.arguments.first?.objectPathValue else { return [] }
        let sender = invocation.sender
        record.client.withLock { $0 = (sender, root) }
        // As bluetoothd: answer, then read the monitors and activate (or release) each.
        Task {
          let reply = try await connection.call(
            destination: sender, path: root, interface: BlueZ.Interface.objectManager,
            member: "GetManagedObjects")
          let objects = BlueZObjectTree.decodeManagedObjects(
            reply.first ?? .array(element: "y", []))
          var monitors: [ObjectPath: [String: DBusValue]] = [:]
          for (path, interfaces) in objects {
            if let properties = interfaces[AdvertisementMonitor.interface] {
              monitors[path] = properties
            }
          }
          record.monitors.withLock { $0 = monitors }
          let member: MemberName = record.releaseInstead.withLock { $0 } ? "Release" : "Activate"
          for path in monitors.keys.sorted() {
            _ = try await connection.call(
              destination: sender, path: path, interface: AdvertisementMonitor.interface,
              member: member)
          }
        }
        return []
      }
      interfaces.append(
        ExportedInterface(
          name: AdvertisementMonitorManager1.interface,
          methods: [register, recorded("UnregisterMonitor", "o")],
          properties: [
            constant("SupportedMonitorTypes", .strings(["or_patterns"])),
            constant("SupportedFeatures", .strings([])),
          ]))
    }
    try connection.export(ExportedObject(interfaces: interfaces), at: Self.adapter)
    _ = try await connection.requestName(BlueZ.service)
  }

  static func device(_ number: Int) -> ObjectPath {
    adapter.appending("dev_00_AA_01_01_00_0\(number)")
  }

  /// Exports a device with manufacturer data of company 0xFFFF.
  func addDevice(_ number: Int) throws {
    let values: [String: DBusValue] = [
      "Address": .string("00:AA:01:01:00:0\(number)"), "Adapter": .objectPath(Self.adapter),
      "Connected": .bool(false), "RSSI": .int16(127),
      "ManufacturerData": .dictionary(
        key: "q", value: "v",
        [DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([0x02, UInt8(number)])))]),
    ]
    try connection.export(
      ExportedObject(interfaces: [
        ExportedInterface(
          name: Device1.interface,
          properties: values.map { name, value in
            ExportedProperty(name: name, signature: value.signature, access: .read) { value }
          })
      ]), at: Self.device(number))
  }

  /// Calls DeviceFound on the client's first monitor, as bluetoothd does for a match.
  func found(_ number: Int) async throws {
    guard let (client, root) = record.client.withLock({ $0 }) else { return }
    _ = try await connection.call(
      destination: client, path: root.appending("monitor0"),
      interface: AdvertisementMonitor.interface, member: "DeviceFound",
      arguments: [.objectPath(Self.device(number))])
  }

  func count(_ member: String) -> Int {
    record.calls.withLock { $0.filter { $0 == member }.count }
  }
}

@Suite struct PassiveScanSessionTests {
  private func withFake(
    monitorManager: Bool = true,
    _ body: (FakeMonitoringBlueZ, CentralManager) async throws -> Void
  ) async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeMonitoringBlueZ(bus: bus, monitorManager: monitorManager)
    defer { bluez.connection.close() }
    let central = try await CentralManager.open(connection: try bus.connect())
    try await body(bluez, central)
    await central.close()
  }

  @Test func reportsOnlyWhatTheMonitorFindsAndNeverStartsDiscovery() async throws {
    try await withFake { bluez, central in
      let scan = try await central.scan(ScanOptions(manufacturerIDs: [0xFFFF], mode: .passive))
      // bluetoothd read one monitor with the company's pattern before the start returned.
      let monitors = bluez.record.monitors.withLock { $0 }
      #expect(monitors.count == 1)
      let properties = try #require(monitors.values.first)
      #expect(properties["Type"]?.stringValue == "or_patterns")
      #expect(
        properties["Patterns"]
          == .array(
            element: "(yyay)", [.structure([.byte(0), .byte(0xFF), .bytes([0xFF, 0xFF])])]))

      try bluez.addDevice(1)  // heard, but not a match: no DeviceFound
      try bluez.addDevice(2)
      try await bluez.found(2)
      var seen: [String] = []
      for try await discovery in scan {
        seen.append(discovery.address.rawValue)
        #expect(discovery.manufacturerData[0xFFFF] == [0x02, 0x02])
        break
      }
      #expect(seen == ["00:AA:01:01:00:02"])
      scan.stop()
      #expect(await eventually { bluez.count("UnregisterMonitor") == 1 })
      #expect(bluez.count("StartDiscovery") == 0 && bluez.count("SetDiscoveryFilter") == 0)
    }
  }

  @Test func withoutTheMonitorInterfaceThePassiveScanIsRefusedNotDowngraded() async throws {
    try await withFake(monitorManager: false) { bluez, central in
      let error = await #expect(throws: BluetoothError.self) {
        _ = try await central.scan(ScanOptions(mode: .passive))
      }
      #expect(error?.code == .passiveScanUnavailable)
      #expect(error?.message.contains("--experimental") == true)
      #expect(bluez.count("StartDiscovery") == 0)
      // The central is free for an active scan afterwards.
      _ = try await central.scan(ScanOptions())
      #expect(bluez.count("StartDiscovery") == 1)
    }
  }

  @Test func aMonitorReleasedBeforeActivationFailsTheStart() async throws {
    try await withFake { bluez, central in
      bluez.record.releaseInstead.withLock { $0 = true }
      let error = await #expect(throws: BluetoothError.self) {
        _ = try await central.scan(ScanOptions(mode: .passive))
      }
      #expect(error?.code == .passiveScanUnavailable)
      #expect(await eventually { bluez.count("UnregisterMonitor") == 1 })
    }
  }

  @Test func manyPatternsRegisterSeveralMonitorsUnderOneRoot() async throws {
    try await withFake { bluez, central in
      _ = try await central.scan(ScanOptions(mode: .passive))  // 16 flags patterns
      let monitors = bluez.record.monitors.withLock { $0 }
      #expect(monitors.count == 3)
      #expect(bluez.count("RegisterMonitor") == 1)
    }
  }
}
