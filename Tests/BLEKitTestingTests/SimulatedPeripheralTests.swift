import BLEKit
import BLEKitTesting
import Bluetooth
import Testing

// BLEKit's CentralManager against the simulated bluetoothd: scan, connect, read, write,
// notifications, scripted ATT errors, held requests, disconnection and vanishing.
@Suite struct SimulatedPeripheralTests {
  static let heartRate = BluetoothUUID(uint16: 0x180D)
  static let measurement = BluetoothUUID(uint16: 0x2A37)
  static let location = BluetoothUUID(uint16: 0x2A38)
  static let control = BluetoothUUID(uint16: 0x2A39)
  static let battery = BluetoothUUID(uint16: 0x180F)

  static func sensor(_ last: Int = 1, rssi: Int = -60, services: [BluetoothUUID]? = nil)
    -> SimulatedPeripheral
  {
    SimulatedPeripheral(
      address: try! BluetoothAddress("00:11:22:33:44:0\(last)"),
      advertisement: SimulatedAdvertisement(
        name: "HR \(last)", serviceUUIDs: services ?? [heartRate],
        manufacturerData: [0x0059: [1, 2, 3]], rssi: rssi),
      services: [
        SimulatedService(
          uuid: heartRate,
          characteristics: [
            SimulatedCharacteristic(
              uuid: measurement, properties: [.notify],
              descriptors: [SimulatedDescriptor(uuid: BluetoothUUID(uint16: 0x2902))]),
            SimulatedCharacteristic(uuid: location, properties: [.read], value: [2]),
            SimulatedCharacteristic(
              uuid: control, properties: [.write, .writeWithoutResponse]),
          ])
      ])
  }

  /// A simulation with `peripherals` in the air and a central manager on it.
  static func with(
    _ peripherals: [SimulatedPeripheral],
    _ body: (SimulatedBluetooth, CentralManager) async throws -> Void
  ) async throws {
    let bluetooth = try await SimulatedBluetooth.start()
    defer { bluetooth.close() }
    for peripheral in peripherals { bluetooth.add(peripheral) }
    let central = try await bluetooth.centralManager()
    #expect(await central.state == .poweredOn)
    try await body(bluetooth, central)
    await central.close()
  }

  /// Scans for the Heart Rate service and connects to the first peripheral found.
  static func connect(_ central: CentralManager) async throws -> Peripheral {
    var found: Discovery?
    for try await discovery in try await central.scan(ScanOptions(services: [heartRate])) {
      found = discovery
      break
    }
    let discovery = try #require(found)
    return try await central.connect(to: discovery.peripheral, timeout: .seconds(10))
  }

  static func characteristic(_ uuid: BluetoothUUID, of peripheral: Peripheral) async throws
    -> RemoteCharacteristic
  {
    let service = try #require(try await peripheral.services([heartRate]).first)
    return try #require(
      try await peripheral.characteristics(for: service).first { $0.uuid == uuid })
  }

  @Test func aScanHearsMatchingPeripheralsWithTheirAdvertisementAndRSSIChanges() async throws {
    let wanted = Self.sensor(1, rssi: -70)
    let other = Self.sensor(2, services: [Self.battery])
    try await Self.with([wanted, other]) { bluetooth, central in
      let scan = try await central.scan(
        ScanOptions(services: [Self.heartRate], allowDuplicates: true))
      try await bluetooth.waitUntilDiscovering()
      var iterator = scan.makeAsyncIterator()
      let first = try #require(try await iterator.next())
      #expect(first.address.rawValue == "00:11:22:33:44:01")
      #expect(first.name == "HR 1")
      #expect(first.rssi == -70)
      #expect(first.serviceUUIDs == [Self.heartRate])
      #expect(first.manufacturerData == [0x0059: [1, 2, 3]])
      wanted.setRSSI(-42)
      let second = try #require(try await iterator.next())
      #expect(second.address == first.address)
      #expect(second.rssi == -42)
      // The other device advertises only Battery: the filter keeps it from being heard.
      #expect(await central.peripheral(address: other.address) == nil)
      scan.stop()
    }
  }

  @Test func connectReadWriteAndDescriptors() async throws {
    let sensor = Self.sensor()
    try await Self.with([sensor]) { _, central in
      let peripheral = try await Self.connect(central)
      try await sensor.waitUntilConnected()
      #expect(sensor.connectionCount == 1)
      let location = try await Self.characteristic(Self.location, of: peripheral)
      #expect(try await peripheral.readValue(for: location) == [2])
      try sensor.setValue([5], for: Self.location)
      #expect(try await peripheral.readValue(for: location) == [5])

      let control = try await Self.characteristic(Self.control, of: peripheral)
      try await peripheral.writeValue([1, 0], for: control)
      try await peripheral.writeValue([9], for: control, type: .withoutResponse)
      try await sensor.waitForWrites(2)
      #expect(
        sensor.recordedWrites == [
          SimulatedWrite(uuid: Self.control, value: [1, 0], withResponse: true),
          SimulatedWrite(uuid: Self.control, value: [9], withResponse: false),
        ])
      var writes = sensor.writes.makeAsyncIterator()
      #expect(await writes.next()?.value == [1, 0])
      #expect(sensor.value(of: Self.control) == [9])

      let measurement = try await Self.characteristic(Self.measurement, of: peripheral)
      let descriptor = try #require(try await peripheral.descriptors(for: measurement).first)
      #expect(descriptor.uuid == BluetoothUUID(uint16: 0x2902))
      try await peripheral.disconnect()
      try await sensor.waitUntilDisconnected()
      #expect(!sensor.isConnected)
    }
  }

  @Test func notificationsArriveInOrderWhileSubscribed() async throws {
    let sensor = Self.sensor()
    try await Self.with([sensor]) { _, central in
      let peripheral = try await Self.connect(central)
      let measurement = try await Self.characteristic(Self.measurement, of: peripheral)
      // Not subscribed yet: nothing is sent.
      #expect(try sensor.notify([0, 50], for: Self.measurement) == false)
      // AcquireNotify is not simulated: BLEKit falls back to StartNotify, as it does when
      // bluetoothd refuses the socket.
      let notifications = try await peripheral.notifications(for: measurement, preferAcquire: true)
      #expect(notifications.method == .startNotify)
      try await sensor.waitUntilSubscribed(to: Self.measurement)
      for bpm: UInt8 in [60, 61, 62] {
        #expect(try sensor.notify([0, bpm], for: Self.measurement))
      }
      var received: [[UInt8]] = []
      for try await value in notifications {
        received.append(value)
        if received.count == 3 { break }
      }
      #expect(received == [[0, 60], [0, 61], [0, 62]])
      await notifications.stop()
      try await sensor.waitUntilUnsubscribed(from: Self.measurement)
      #expect(!sensor.isSubscribed(to: Self.measurement))
    }
  }

  @Test func anATTErrorReachesTheAppAsBluetoothdAnswersIt() async throws {
    let sensor = Self.sensor()
    sensor.fail(Self.location, with: .insufficientEncryption)
    sensor.fail(Self.control, with: .attError(0x80))
    try await Self.with([sensor]) { _, central in
      let peripheral = try await Self.connect(central)
      let location = try await Self.characteristic(Self.location, of: peripheral)
      let error = await #expect(throws: BluetoothError.self) {
        _ = try await peripheral.readValue(for: location)
      }
      #expect(error?.code == .notPermitted)
      #expect(error?.underlyingName == "org.bluez.Error.NotPermitted")
      #expect(error?.underlyingMessage == "Not paired")

      let control = try await Self.characteristic(Self.control, of: peripheral)
      let writeError = await #expect(throws: BluetoothError.self) {
        try await peripheral.writeValue([1], for: control)
      }
      #expect(writeError?.attErrorCode == 0x80)
      #expect(sensor.recordedWrites.isEmpty)

      sensor.fail(Self.location, with: nil)
      #expect(try await peripheral.readValue(for: location) == [2])
    }
  }

  @Test func aHeldReadIsServedWhenReleasedAndFailsWhenTheLinkDrops() async throws {
    let sensor = Self.sensor()
    sensor.fail(Self.location, with: .noAnswer)
    try await Self.with([sensor]) { _, central in
      let peripheral = try await Self.connect(central)
      let location = try await Self.characteristic(Self.location, of: peripheral)
      let late = Task { try await peripheral.readValue(for: location) }
      try await sensor.waitUntilHeld(1)
      sensor.releaseHeldRequests()
      #expect(try await late.value == [2])

      let lost = Task { try await peripheral.readValue(for: location) }
      try await sensor.waitUntilHeld(1)
      sensor.disconnect()
      let error = await #expect(throws: BluetoothError.self) { try await lost.value }
      // As bluetoothd answers a request its link's loss cancelled.
      #expect(error?.underlyingName == "org.bluez.Error.Failed")
      #expect(error?.underlyingMessage == "Operation failed")
    }
  }

  @Test func aPeripheralThatDisconnectsEndsTheSubscriptionAndOneThatVanishesIsRemoved()
    async throws
  {
    let sensor = Self.sensor()
    try await Self.with([sensor]) { _, central in
      let peripheral = try await Self.connect(central)
      let measurement = try await Self.characteristic(Self.measurement, of: peripheral)
      let notifications = try await peripheral.notifications(for: measurement)
      try await sensor.waitUntilSubscribed(to: Self.measurement)
      sensor.disconnect()
      let error = await #expect(throws: BluetoothError.self) {
        for try await _ in notifications {}
      }
      #expect(error?.code == .disconnected)
      #expect(await !peripheral.isConnected())

      // It can be connected again, and then goes out of range.
      let again = try await central.connect(to: peripheral.identifier, timeout: .seconds(10))
      try await sensor.waitUntilConnected()
      #expect(sensor.connectionCount == 2)
      sensor.vanish()
      try await sensor.waitUntilDisconnected()
      // A scan's start is a round trip on the manager's connection: bluetoothd's signals sent
      // before it (the link's end, the device's removal) have reached the manager by then.
      let scan = try await central.scan(ScanOptions(services: [Self.heartRate]))
      #expect(await !again.isConnected())
      #expect(await central.peripheral(address: sensor.address) == nil)
      sensor.reappear()
      var iterator = scan.makeAsyncIterator()
      #expect(try await iterator.next()?.address == sensor.address)
      scan.stop()
    }
  }
}
