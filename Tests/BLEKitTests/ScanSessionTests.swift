import BlueZ
import Bluetooth
import DBus
import Synchronization
import TestSupport
import Testing

// Scans against a stand-in for bluetoothd on a private bus: the discovery calls, the
// client-side filter, known peripherals, the end on power-off, and a resuming scan across a
// bluetoothd restart. Also the tree's observers, which deliver the scan's discoveries.
@testable import BLEKit

/// A fake org.bluez with one adapter (hci0) that answers the discovery calls and records them
/// (also used by BlekitBusLossTests).
final class FakeScanningBlueZ: Sendable {
  /// What the fake's method handlers share with the test.
  final class Record: Sendable {
    let calls = Mutex<[String]>([])
    let powered = Mutex(true)
    /// false: StartDiscovery is recorded but never answered (a reply lost on its way).
    let answersStart = Mutex(true)
  }
  let connection: DBusConnection
  let record = Record()
  static let adapter: ObjectPath = "/org/bluez/hci0"
  static let wanted = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
  static let other = "0000180f-0000-1000-8000-00805f9b34fb"

  init(bus: ClientTestBus) async throws {
    connection = try bus.connect()
    try connection.addObjectManager(at: "/")
    let record = self.record
    let method = { (name: MemberName, signature: Signature) in
      ExportedMethod(name: name, inSignature: signature, outSignature: "") { _ in
        record.calls.withLock { $0.append(name.rawValue) }
        if name == "StartDiscovery", !record.answersStart.withLock({ $0 }) {
          try await Task.sleep(for: .seconds(3600))
        }
        return []
      }
    }
    let constant = { (name: String, value: DBusValue) in
      ExportedProperty(name: name, signature: value.signature, access: .read) { value }
    }
    try connection.export(
      ExportedObject(interfaces: [
        ExportedInterface(
          name: Adapter1.interface,
          methods: [
            method("SetDiscoveryFilter", "a{sv}"), method("StartDiscovery", ""),
            method("StopDiscovery", ""),
          ],
          properties: [
            constant("Address", .string("00:AA:01:00:00:00")),
            constant("Discovering", .bool(false)),
            ExportedProperty(name: "Powered", signature: "b", access: .read) {
              .bool(record.powered.withLock { $0 })
            },
          ])
      ]), at: Self.adapter)
    _ = try await connection.requestName(BlueZ.service)
  }

  /// Exports a device heard advertising `uuids`.
  func advertise(_ number: Int, uuids: [String]) throws {
    let address = "00:AA:01:01:00:0\(number)"
    let values: [String: DBusValue] = [
      "Address": .string(address), "Adapter": .objectPath(Self.adapter),
      "Connected": .bool(false), "UUIDs": .strings(uuids), "RSSI": .int16(-50),
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

  static func device(_ number: Int) -> ObjectPath {
    adapter.appending("dev_00_AA_01_01_00_0\(number)")
  }

  func powerOff() throws {
    record.powered.withLock { $0 = false }
    try connection.emitPropertiesChanged(
      path: Self.adapter, interface: Adapter1.interface, changed: ["Powered": .bool(false)])
  }

  /// The controller unplugged: bluetoothd reports the power-off first, then removes the adapter.
  func unplug() throws {
    try powerOff()
    connection.unexport(Self.adapter)
  }

  /// bluetoothd's Discovering on hci0 changes (as it does once a session's start went through).
  func reportDiscovering(_ discovering: Bool) throws {
    try connection.emitPropertiesChanged(
      path: Self.adapter, interface: Adapter1.interface,
      changed: ["Discovering": .bool(discovering)])
  }

  func count(_ member: String) -> Int {
    record.calls.withLock { $0.filter { $0 == member }.count }
  }

  func close() { connection.close() }
}

/// Runs `body` with a fake bluetoothd and a central on a private bus of its own (also used by
/// FindDeadlineTests).
func withFakeBlueZ(
  _ body: (FakeScanningBlueZ, CentralManager) async throws -> Void
) async throws {
  let bus = try ClientTestBus()
  defer { bus.stop() }
  let bluez = try await FakeScanningBlueZ(bus: bus)
  defer { bluez.close() }
  let central = try await CentralManager.open(connection: try bus.connect())
  try await body(bluez, central)
  await central.close()
}

@Suite struct ScanSessionTests {
  private static let wanted = try! BluetoothUUID(FakeScanningBlueZ.wanted)

  @Test func reportsKnownAndNewMatchingPeripheralsOnceAndStopsDiscovery() async throws {
    try await withFakeBlueZ { bluez, central in
      try bluez.advertise(1, uuids: [FakeScanningBlueZ.wanted])  // known before the scan
      #expect(await eventually { central.objects.objects[FakeScanningBlueZ.device(1)] != nil })

      // The scan lives in this scope: dropping the stream at its end stops discovery.
      var seen: [String] = []
      do {
        let scan = try await central.scan(ScanOptions(services: [Self.wanted]))
        #expect(bluez.count("SetDiscoveryFilter") == 1)
        #expect(bluez.count("StartDiscovery") == 1)
        try bluez.advertise(2, uuids: [FakeScanningBlueZ.other])  // filtered out here
        try bluez.advertise(3, uuids: [FakeScanningBlueZ.wanted])
        // A new RSSI for an already reported peripheral is not a new discovery without duplicates.
        try bluez.connection.emitPropertiesChanged(
          path: FakeScanningBlueZ.device(1), interface: Device1.interface,
          changed: ["RSSI": .int16(-40)])
        try bluez.advertise(4, uuids: [FakeScanningBlueZ.wanted])
        for try await discovery in scan {
          seen.append(discovery.address.rawValue)
          if seen.count == 3 { break }
        }
      }
      #expect(seen == ["00:AA:01:01:00:01", "00:AA:01:01:00:03", "00:AA:01:01:00:04"])
      #expect(await eventually { bluez.count("StopDiscovery") == 1 })
      // The manager is free for the next scan once the first one's stop is done.
      var again: DiscoveryStream?
      for _ in 0..<100 where again == nil {
        again = try? await central.scan(ScanOptions(includeKnownPeripherals: false))
        if again == nil { try await Task.sleep(for: .milliseconds(20)) }
      }
      #expect(again != nil)
      #expect(bluez.count("StartDiscovery") == 2)
    }
  }

  @Test func duplicatesReportEveryAdvertisement() async throws {
    try await withFakeBlueZ { bluez, central in
      let scan = try await central.scan(ScanOptions(allowDuplicates: true))
      try bluez.advertise(1, uuids: [])
      for rssi in [-45, -44] {
        try bluez.connection.emitPropertiesChanged(
          path: FakeScanningBlueZ.device(1), interface: Device1.interface,
          changed: ["RSSI": .int16(Int16(rssi))])
      }
      var rssis: [Int?] = []
      for try await discovery in scan {
        rssis.append(discovery.rssi)
        if rssis.count == 3 { break }
      }
      #expect(rssis == [-50, -45, -44])
    }
  }

  @Test func restartsAtTheIntervalWhileRunningAndNotAfterTheStop() async throws {
    try await withFakeBlueZ { bluez, central in
      do {
        let scan = try await central.scan(ScanOptions(restartInterval: .milliseconds(200)))
        // Each restart is StopDiscovery, SetDiscoveryFilter, StartDiscovery.
        #expect(await eventually { bluez.count("StartDiscovery") >= 3 })
        #expect(bluez.count("StopDiscovery") >= 2)
        #expect(bluez.count("SetDiscoveryFilter") >= 3)
        _ = scan
      }
      // Dropped: one last StopDiscovery, then no more restarts.
      #expect(await eventually { bluez.count("StopDiscovery") == bluez.count("StartDiscovery") })
      let starts = bluez.count("StartDiscovery")
      try await Task.sleep(for: .milliseconds(600))
      #expect(bluez.count("StartDiscovery") == starts)
    }
  }

  @Test func endsWithPoweredOffWhenTheAdapterGoesOff() async throws {
    try await withFakeBlueZ { bluez, central in
      let scan = try await central.scan()
      try bluez.powerOff()
      let error = await #expect(throws: BluetoothError.self) {
        for try await _ in scan {}
      }
      #expect(error?.code == .poweredOff)
      #expect(await eventually { bluez.count("StopDiscovery") == 1 })
    }
  }

  @Test func aScanWithATimeoutEndsByItselfWithoutAnError() async throws {
    try await withFakeBlueZ { bluez, central in
      let start = ContinuousClock.now
      let scan = try await central.scan(ScanOptions(timeout: .milliseconds(400)))
      try bluez.advertise(1, uuids: [])
      var seen: [String] = []
      for try await discovery in scan { seen.append(discovery.address.rawValue) }
      #expect(ContinuousClock.now - start >= .milliseconds(400))
      #expect(ContinuousClock.now - start < .seconds(5))
      #expect(seen == ["00:AA:01:01:00:01"])
      #expect(await eventually { bluez.count("StopDiscovery") == 1 })
    }
  }

  @Test func stoppingAScanEndsItsStreamAndItsDiscovery() async throws {
    try await withFakeBlueZ { bluez, central in
      let scan = try await central.scan()
      try bluez.advertise(1, uuids: [])
      var iterator = scan.makeAsyncIterator()
      #expect(try await iterator.next()?.address.rawValue == "00:AA:01:01:00:01")
      scan.stop()
      #expect(try await iterator.next() == nil)
      #expect(await eventually { bluez.count("StopDiscovery") == 1 })
    }
  }

  @Test func resumingScanPausesForABluetoothdRestartAndResumes() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let first = try await FakeScanningBlueZ(bus: bus)
    let central = try await CentralManager.open(connection: try bus.connect())
    let interruptions = Mutex<[BluetoothdInterruption]>([])
    let scan = try await central.scan(ScanOptions(resumeWithin: .seconds(20))) {
      interruption in interruptions.withLock { $0.append(interruption) }
    }
    try first.advertise(1, uuids: [])
    var iterator = scan.makeAsyncIterator()
    #expect(try await iterator.next()?.address.rawValue == "00:AA:01:01:00:01")

    first.close()  // bluetoothd exits
    #expect(await eventually { interruptions.withLock { $0.count } == 1 })
    let second = try await FakeScanningBlueZ(bus: bus)  // and comes back
    defer { second.close() }
    #expect(await eventually { second.count("StartDiscovery") == 1 })
    try second.advertise(2, uuids: [])
    #expect(try await iterator.next()?.address.rawValue == "00:AA:01:01:00:02")
    let seen = interruptions.withLock { $0 }
    #expect(seen.count == 2)
    #expect(seen.last == .resumed)
    await central.close()
  }

  @Test func resumingScansEndWithTheRemovalWhenTheControllerIsUnplugged() async throws {
    try await withFakeBlueZ { bluez, central in
      let interruptions = Mutex<[BluetoothdInterruption]>([])
      let scan = try await central.scan(ScanOptions(resumeWithin: .seconds(30))) {
        interruption in interruptions.withLock { $0.append(interruption) }
      }
      try bluez.advertise(1, uuids: [])
      var iterator = scan.makeAsyncIterator()
      #expect(try await iterator.next()?.address.rawValue == "00:AA:01:01:00:01")
      let start = ContinuousClock.now
      try bluez.unplug()
      let error = await #expect(throws: BluetoothError.self) {
        while try await iterator.next() != nil {}
      }
      // The removal, not the power-off that came first, and no wait for a bluetoothd return
      // beyond the grace in which a stopping bluetoothd would have left the bus.
      #expect(error?.code == .adapterNotFound)
      #expect(error?.message.contains("hci0 was removed") == true)
      #expect(ContinuousClock.now - start < CentralManager.serviceStopGrace + .seconds(5))
      #expect(interruptions.withLock { $0 }.isEmpty)
    }
  }

  @Test func resumingScansEndAtOnceWhenTheBusIsLost() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeScanningBlueZ(bus: bus)
    let central = try await CentralManager.open(connection: try bus.connect())
    let interruptions = Mutex<[BluetoothdInterruption]>([])
    // What `blekit scan` (piped) and `blekit monitor` run.
    let scan = try await central.scan(ScanOptions(resumeWithin: .seconds(30))) {
      interruption in interruptions.withLock { $0.append(interruption) }
    }
    let seen = Mutex<[String]>([])
    let consumer = Task { () -> BluetoothError? in
      do {
        for try await discovery in scan { seen.withLock { $0.append(discovery.address.rawValue) } }
        return nil
      } catch {
        return error as? BluetoothError
      }
    }
    try bluez.advertise(1, uuids: [])
    #expect(await eventually { seen.withLock { $0 } == ["00:AA:01:01:00:01"] })
    let start = ContinuousClock.now
    bus.stop()
    let ending = await within(.seconds(10), consumer)
    guard case .finished(let error) = ending else {
      Issue.record("the scan was still running 10 s after the bus died")
      return
    }
    #expect(error?.code == .busLost)
    #expect(ContinuousClock.now - start < .seconds(10))
    // Not taken for a bluetoothd restart: no pause waiting 30 s for it.
    #expect(interruptions.withLock { $0 }.isEmpty)
    await central.close()
  }

  @Test func anObserverMayCancelItselfFromItsHandler() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeScanningBlueZ(bus: bus)
    defer { bluez.close() }
    let client = try bus.connect()
    defer { client.close() }
    let tree = try await BlueZObjectTree.start(connection: client)
    let calls = Mutex(0)
    let slot = Mutex<BlueZObjectObservation?>(nil)
    var known: [ObjectPath] = []
    let observation = tree.observe(
      { _ in
        calls.withLock { $0 += 1 }
        slot.withLock { $0?.cancel() }  // would deadlock if cancelling took the tree's lock
      },
      startingWith: { objects, running in
        known = objects.keys.sorted()
        #expect(running)
      })
    slot.withLock { $0 = observation }
    #expect(known == [FakeScanningBlueZ.adapter])
    try bluez.advertise(1, uuids: [])
    try bluez.advertise(2, uuids: [])
    // A later subscriber proves both signals were applied; the cancelled observer heard one.
    #expect(await eventually { tree.objects[FakeScanningBlueZ.device(2)] != nil })
    #expect(calls.withLock { $0 } == 1)
    #expect(observation.isCancelled)

    let ended = Mutex(false)
    let other = tree.observe { _ in }
    other.onEnd { ended.withLock { $0 = true } }
    tree.stop()
    #expect(ended.withLock { $0 })
    #expect(other.isCancelled)
  }

  @Test func treeReplayReportsTheChangesOfItsSignals() throws {
    let path: ObjectPath = "/org/bluez/hci0/dev_00_00_00_00_00_01"
    let added = Signal(
      sender: nil, path: "/", interface: BlueZ.Interface.objectManager,
      member: "InterfacesAdded",
      arguments: [
        .objectPath(path),
        .dictionary(
          key: "s", value: "a{sv}",
          [
            DBusDictEntry(
              key: .string(Device1.interface.rawValue),
              value: .dictionaryOfVariants(["RSSI": .int16(-70)]))
          ]),
      ])
    let changed = Signal(
      sender: nil, path: path, interface: .properties, member: "PropertiesChanged",
      arguments: [
        .string(Device1.interface.rawValue), .dictionaryOfVariants(["RSSI": .int16(-60)]),
        .strings([]),
      ])
    let messages = try [added, changed].map { signal in
      let message = try DBusMessage.signal(
        path: signal.path, interface: signal.interface, member: signal.member)
      try message.append(signal.arguments)
      return message
    }
    let events = BlueZObjectTree.replay(messages)
    #expect(events.count == 2)
    guard case .propertiesChanged(path, Device1.interface, _, _, let current)? = events.last else {
      Issue.record("expected the RSSI change, got \(events)")
      return
    }
    #expect(current["RSSI"] == .int16(-60))
  }
}

@Suite struct DiscoveryStreamBoundTests {
  @Test func aConsumerThatFallsBehindLosesTheOldestAndTheCountSaysSo() async throws {
    let (stream, continuation, feed) = DiscoveryStream.make()
    let path: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
    let advertised = try #require(
      DeviceAdvertisement([
        "Address": .string("00:AA:01:01:00:01"), "Adapter": .objectPath("/org/bluez/hci0"),
        "Connected": .bool(false),
      ]))
    let total = DiscoveryStream.bufferLimit + 100
    var sent: [ContinuousClock.Instant] = []
    for _ in 0..<total {
      let discovery = try #require(Discovery(advertised, path: path, at: .now))
      sent.append(discovery.timestamp)
      feed(discovery)
    }
    continuation.finish()
    #expect(stream.droppedCount == 100)
    var received: [ContinuousClock.Instant] = []
    for try await discovery in stream { received.append(discovery.timestamp) }
    #expect(received == Array(sent.suffix(DiscoveryStream.bufferLimit)))
  }
}
