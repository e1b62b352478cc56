import BLEKit
import BLEKitTesting
import Bluetooth
import Foundation
import Testing

// BLEKit's PeripheralManager against the simulated bluetoothd, driven by a simulated central;
// and a simulated peripheral made from one of blekit's serve profiles.
@Suite struct SimulatedCentralTests {
  static let service = BluetoothUUID(uint16: 0x180F)
  static let level = BluetoothUUID(uint16: 0x2A19)
  static let control = BluetoothUUID(uint16: 0x2A9B)

  @Test(arguments: [true, false])
  func aCentralReadsWritesAndSubscribesToTheAppsServices(socket: Bool) async throws {
    let bluetooth = try await SimulatedBluetooth.start()
    defer { bluetooth.close() }
    let manager = try await bluetooth.peripheralManager()
    let level = MutableCharacteristic(
      type: Self.level, properties: [.read, .notify], permissions: [.readable],
      usesNotifySocket: socket, onRead: { request in [87, UInt8(request.mtu ?? 0)] })
    let control = MutableCharacteristic(
      type: Self.control, properties: [.write, .writeWithoutResponse],
      permissions: [.writeable],
      onWrite: { request throws(BluetoothError) in
        if request.value == [0xFF] { throw .att(.writeNotPermitted) }
      })
    try await manager.add(MutableService(type: Self.service, characteristics: [level, control]))
    try await bluetooth.waitUntilServicesRegistered()
    try await manager.startAdvertising(AdvertisingPayload(localName: "Gauge"))
    try await bluetooth.waitUntilAdvertising()
    #expect(bluetooth.advertisedNames == ["Gauge"])

    let central = try await bluetooth.connectCentral(mtu: 100)
    #expect(try await central.read(Self.level) == [87, 100])

    var events = manager.events.makeAsyncIterator()
    try await central.write([1, 2], to: Self.control)
    try await central.write([3], to: Self.control, withResponse: false)
    var writes: [ATTWriteRequest] = []
    while writes.count < 2, let event = await events.next() {
      if case .write(let request) = event { writes.append(request) }
    }
    #expect(writes.map(\.value) == [[1, 2], [3]])
    #expect(writes.map(\.withoutResponse) == [false, true])
    #expect(writes.first?.central?.address == central.address.rawValue)
    await #expect(throws: SimulationError.self) {
      try await central.write([0xFF], to: Self.control)
    }

    let values = try await central.subscribe(to: Self.level)
    while let event = await events.next() {
      if case .subscribed(_, let characteristic) = event, characteristic.uuid == Self.level {
        break
      }
    }
    try await manager.updateValue([86], for: level)
    try await manager.updateValue([85], for: level)
    var received: [[UInt8]] = []
    for await value in values {
      received.append(value)
      if received.count == 2 { break }
    }
    #expect(received == [[86], [85]])
    central.disconnect()
    await manager.close()
  }

  @Test func aPeripheralFromAServeProfileServesItsValues() async throws {
    let profile = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("../../profiles/heart-rate.json").standardized
    let twin = try SimulatedPeripheral(
      profile: profile, address: try BluetoothAddress("00:11:22:33:44:99"), rssi: -48)
    let bluetooth = try await SimulatedBluetooth.start()
    defer { bluetooth.close() }
    bluetooth.add(twin)
    let central = try await bluetooth.centralManager()
    let heartRate = BluetoothUUID(uint16: 0x180D)
    var found: Discovery?
    for try await discovery in try await central.scan(ScanOptions(services: [heartRate])) {
      found = discovery
      break
    }
    #expect(found?.name == "blekit HR")
    #expect(found?.rssi == -48)
    let peripheral = try await central.connect(to: try #require(found).peripheral)
    let services = try await peripheral.services()
    #expect(services.map(\.uuid) == [heartRate, BluetoothUUID(uint16: 0x180A)])
    let information = try await peripheral.characteristics(for: services[1])
    #expect(try await peripheral.readValue(for: information[0]) == Array("blekit".utf8))
    let rate = try await peripheral.characteristics(for: services[0])
    #expect(rate.map(\.uuid) == [0x2A37, 0x2A38, 0x2A39].map { BluetoothUUID(uint16: $0) })
    #expect(try await peripheral.readValue(for: rate[1]) == [1])
    await central.close()
  }
}
