import BlueZ
import DBus
import TestSupport
import Testing

// A CentralManager's state from bluetoothd's adapters (a stand-in on a private bus), the choice
// of adapter, and which object events concern the state.
@testable import BLEKit

@Suite struct CentralManagerStateTests {
  @Test func centralFailsFastOnceTheBusIsLost() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    try bluez.exportAdapter("hci0", powered: true)
    let central = try await CentralManager.open(connection: try bus.connect())
    #expect(await central.state == .poweredOn)
    let updates = await central.stateUpdates()
    bus.stop()
    // The state stream ends (nothing can change any more), and the central says why.
    let states = await within(.seconds(5)) { () -> [CentralState] in
      var all: [CentralState] = []
      for await state in updates { all.append(state) }
      return all
    }
    #expect(states.value?.last == .serviceUnavailable)
    let error = await #expect(throws: BluetoothError.self) {
      try await central.requirePoweredOn()
    }
    #expect(error?.code == .busLost)
    // Waiting for a state returns at once instead of waiting out its limit.
    let start = ContinuousClock.now
    await #expect(throws: BluetoothError.self) {
      try await central.waitUntilPoweredOn(timeout: .seconds(15))
    }
    #expect(ContinuousClock.now - start < .seconds(5))
    await central.close()
  }

  @Test func closingACentralClosesTheConnectionItOpened() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }
    let address = bus.address
    let central = try await CentralManager.open(
      adapter: nil, connecting: { () throws(DBusError) in try DBusConnection(address: address) })
    let connection = central.objects.connection
    #expect(connection.isClosed == false)
    await central.close()
    // Its socket, reading thread and queue go with it.
    #expect(connection.isClosed)

    // A connection given to open stays the caller's.
    let given = try bus.connect()
    defer { given.close() }
    let other = try await CentralManager.open(connection: given)
    await other.close()
    #expect(given.isClosed == false)
  }

  @Test func centralStateFromAdapters() async throws {
    let bus = try ClientTestBus()
    defer { bus.stop() }

    // No bluetoothd on the bus at all.
    let lonely = try await CentralManager.open(connection: try bus.connect())
    #expect(await lonely.state == .serviceUnavailable)
    await #expect(throws: BluetoothError.self) { try await lonely.requirePoweredOn() }
    await lonely.close()

    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportAdapter("hci1", powered: false)

    let central = try await CentralManager.open(connection: try bus.connect())
    #expect(await central.state == .poweredOn)
    #expect(await central.adapterName == "hci0")
    await central.close()

    let second = try await CentralManager.open(adapter: "hci1", connection: try bus.connect())
    #expect(await second.state == .poweredOff)
    let offError = await #expect(throws: BluetoothError.self) {
      try await second.requirePoweredOn()
    }
    #expect(offError?.code == .poweredOff)
    await second.close()

    let unknown = await #expect(throws: BluetoothError.self) {
      _ = try await CentralManager.open(adapter: "hci7", connection: try bus.connect())
    }
    #expect(unknown?.code == .adapterNotFound)
    #expect(unknown?.message.contains("hci0, hci1") == true)
  }

  @Test func adapterChoice() {
    let paths: [ObjectPath] = ["/org/bluez/hci1", "/org/bluez/hci0"]
    #expect(CentralManager.chooseAdapter(nil, among: paths) == "/org/bluez/hci0")
    #expect(CentralManager.chooseAdapter("hci1", among: paths) == "/org/bluez/hci1")
    #expect(CentralManager.chooseAdapter("hci7", among: paths) == nil)
    #expect(CentralManager.chooseAdapter(nil, among: ["/org/bluez/hci2"]) == "/org/bluez/hci2")
    #expect(CentralManager.chooseAdapter(nil, among: []) == nil)
  }

  @Test func onlyPoweredChangesOfAnAdapterConcernTheState() {
    let adapter: ObjectPath = "/org/bluez/hci0"
    func changed(
      _ interface: InterfaceName, _ changed: [String: DBusValue], invalidated: [String] = []
    )
      -> BlueZObjectEvent
    {
      .propertiesChanged(
        adapter, interface, changed: changed, invalidated: invalidated, current: [:])
    }
    #expect(changed(Adapter1.interface, ["Powered": .bool(false)]).concernsCentralState)
    #expect(changed(Adapter1.interface, [:], invalidated: ["Powered"]).concernsCentralState)
    #expect(!changed(Adapter1.interface, ["Discovering": .bool(true)]).concernsCentralState)
    #expect(!changed(Device1.interface, ["Powered": .bool(true)]).concernsCentralState)
    #expect(
      BlueZObjectEvent.interfacesAdded(adapter, [Adapter1.interface: [:]]).concernsCentralState)
    #expect(BlueZObjectEvent.interfacesRemoved(adapter, [Adapter1.interface]).concernsCentralState)
    #expect(!BlueZObjectEvent.interfacesRemoved(adapter, [Device1.interface]).concernsCentralState)
    #expect(BlueZObjectEvent.serviceStopped.concernsCentralState)
  }
}
