// A simulated remote peripheral: the Device1 object bluetoothd would export for it while
// scanning, and after a connection its GattService1/GattCharacteristic1/GattDescriptor1 objects.
import BLEKit
import BlueZ
import Bluetooth
import DBus

/// A peripheral in the simulated air, seen by the app's ``BLEKit/CentralManager``.
///
/// Build one from code (``init(address:advertisement:services:mtu:)``) or from a `blekit serve`
/// profile (``init(profile:address:rssi:)``), then give it to
/// ``SimulatedBluetooth/add(_:)``. It advertises while the app scans, accepts connections,
/// serves reads, writes and subscriptions from its values, and follows the test's script:
/// ``notify(_:for:)``, ``setRSSI(_:)``, ``fail(_:with:)``, ``disconnect()``, ``vanish()``.
///
/// Waits (``waitUntilConnected(timeout:)`` and the like) return as soon as the event happened,
/// so tests need no sleeps; their timeout only turns a broken app into a failed test.
///
/// A characteristic or descriptor is named by its UUID: with two of the same UUID, the first
/// in the database is the one meant.
public final class SimulatedPeripheral: Sendable {
  /// The device address the app sees (`Device1.Address`, a public address).
  public let address: BluetoothAddress
  /// The MTU each characteristic reports (`GattCharacteristic1.MTU`); no exchange is simulated.
  public let mtu: Int
  let database: Database
  let state: Observed<State>
  private let writeStream: AsyncStream<SimulatedWrite>
  private let writeContinuation: AsyncStream<SimulatedWrite>.Continuation

  struct State: Sendable {
    var advertisement: SimulatedAdvertisement
    /// Attribute values by index in ``Database/attributes``.
    var values: [[UInt8]]
    /// Value last exported as `Value` of each characteristic, by index.
    var cachedValues: [Int: [UInt8]] = [:]
    var host: SimulationHost?
    /// The device object is on the bus.
    var exported = false
    var vanished = false
    var connected = false
    var servicesResolved = false
    var connections = 0
    /// Characteristics (by index) with notifications on.
    var notifying: Set<Int> = []
    var faults: [BluetoothUUID: SimulatedFault] = [:]
    var held: [Int: CheckedContinuation<Bool, Never>] = [:]
    var nextHeld = 0
    var writes: [SimulatedWrite] = []
  }

  /// A peripheral with this advertisement and GATT database.
  /// - Parameter mtu: what characteristics report as `MTU` (23, the LE default, unless set).
  public init(
    address: BluetoothAddress, advertisement: SimulatedAdvertisement,
    services: [SimulatedService], mtu: Int = 23
  ) {
    self.address = address
    self.mtu = mtu
    database = Database(services: services)
    state = Observed(
      State(advertisement: advertisement, values: database.attributes.map(\.initialValue)))
    (writeStream, writeContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  // MARK: What the test reads

  /// The writes the app made, in order, as they arrive (one consumer).
  public var writes: AsyncStream<SimulatedWrite> { writeStream }

  /// Every write so far, in order.
  public var recordedWrites: [SimulatedWrite] { state.read(\.writes) }

  /// Whether the app is connected.
  public var isConnected: Bool { state.read(\.connected) }

  /// How many times the app has connected.
  public var connectionCount: Int { state.read(\.connections) }

  /// Whether the app has notifications or indications of `characteristic` on.
  public func isSubscribed(to characteristic: BluetoothUUID) -> Bool {
    guard let index = database.index(of: characteristic) else { return false }
    return state.read { $0.notifying.contains(index) }
  }

  /// The current value of a characteristic or descriptor (after the app's writes).
  public func value(of uuid: BluetoothUUID) -> [UInt8]? {
    guard let index = database.index(of: uuid) else { return nil }
    return state.read { $0.values[index] }
  }

  /// How many requests a ``SimulatedFault/noAnswer`` fault holds now.
  public var heldRequestCount: Int { state.read(\.held.count) }

  // MARK: Waiting for the app

  /// Returns once the app has connected and the services are resolved.
  public func waitUntilConnected(timeout: Duration = .seconds(10)) async throws {
    try await state.wait("\(address) is connected", timeout: timeout) { $0.servicesResolved }
  }

  /// Returns once no app is connected.
  public func waitUntilDisconnected(timeout: Duration = .seconds(10)) async throws {
    try await state.wait("\(address) is disconnected", timeout: timeout) { !$0.connected }
  }

  /// Returns once the app has subscribed to `characteristic`.
  public func waitUntilSubscribed(
    to characteristic: BluetoothUUID, timeout: Duration = .seconds(10)
  ) async throws {
    guard let index = database.index(of: characteristic) else {
      throw SimulationError("\(address) has no characteristic \(characteristic)")
    }
    try await state.wait("the app subscribed to \(characteristic)", timeout: timeout) {
      $0.notifying.contains(index)
    }
  }

  /// Returns once the app has unsubscribed from `characteristic` (or the link went).
  public func waitUntilUnsubscribed(
    from characteristic: BluetoothUUID, timeout: Duration = .seconds(10)
  ) async throws {
    guard let index = database.index(of: characteristic) else {
      throw SimulationError("\(address) has no characteristic \(characteristic)")
    }
    try await state.wait("the app unsubscribed from \(characteristic)", timeout: timeout) {
      !$0.notifying.contains(index)
    }
  }

  /// Returns once `count` writes have arrived in all.
  public func waitForWrites(_ count: Int, timeout: Duration = .seconds(10)) async throws {
    try await state.wait("\(count) writes arrived", timeout: timeout) { $0.writes.count >= count }
  }

  /// Returns once a ``SimulatedFault/noAnswer`` fault holds at least `count` requests.
  public func waitUntilHeld(_ count: Int = 1, timeout: Duration = .seconds(10)) async throws {
    try await state.wait("\(count) requests are held", timeout: timeout) {
      $0.held.count >= count
    }
  }

  // MARK: Scripting the peripheral

  /// Changes the signal strength the app hears; while the app scans, bluetoothd reports it as
  /// a change of `Device1.RSSI` (an advertisement heard again).
  public func setRSSI(_ rssi: Int) {
    let report = state.update { state -> Bool in
      state.advertisement.rssi = rssi
      return state.exported && state.host?.isDiscovering == true
    }
    if report {
      emit(path, Device1.interface, ["RSSI": .int16(Int16(clamping: rssi))])
    }
  }

  /// Sets a value without telling the app (the next read returns it).
  public func setValue(_ value: [UInt8], for uuid: BluetoothUUID) throws {
    guard let index = database.index(of: uuid) else {
      throw SimulationError("\(address) has no attribute \(uuid)")
    }
    state.update { $0.values[index] = value }
  }

  /// Sends a notification (or indication) of `value` from `characteristic`, and sets it as
  /// its value. Returns `false`, sending nothing, when the app is not subscribed (as a
  /// peripheral's stack does).
  @discardableResult
  public func notify(_ value: [UInt8], for characteristic: BluetoothUUID) throws -> Bool {
    guard let index = database.index(of: characteristic) else {
      throw SimulationError("\(address) has no characteristic \(characteristic)")
    }
    let subscribed = state.update { state -> Bool in
      state.values[index] = value
      guard state.connected, state.notifying.contains(index) else { return false }
      state.cachedValues[index] = value
      return true
    }
    if subscribed {
      emit(
        database.path(of: index, device: path), GattCharacteristic1.interface,
        ["Value": .bytes(value)])
    }
    return subscribed
  }

  /// Answers requests to `uuid` (a characteristic or descriptor) with `fault` from now on;
  /// `nil` serves them again.
  public func fail(_ uuid: BluetoothUUID, with fault: SimulatedFault?) {
    state.update { $0.faults[uuid] = fault }
  }

  /// Serves the requests a ``SimulatedFault/noAnswer`` fault holds (late). The fault stays:
  /// remove it with `fail(uuid, with: nil)` first to serve later requests at once.
  public func releaseHeldRequests() {
    let held = state.update { state -> [CheckedContinuation<Bool, Never>] in
      defer { state.held = [:] }
      return Array(state.held.values)
    }
    for request in held { request.resume(returning: true) }
  }

  /// Ends the link from the peripheral's side (or as a supervision timeout would):
  /// `ServicesResolved` and `Connected` become false and the GATT objects go away.
  public func disconnect() { dropLink() }

  /// Goes out of range: the link (if any) drops and bluetoothd removes the device object
  /// (InterfacesRemoved). Until ``reappear()``, it is not heard again.
  public func vanish() {
    dropLink()
    let remove = state.update { state -> SimulationHost? in
      state.vanished = true
      defer { state.exported = false }
      return state.exported ? state.host : nil
    }
    remove?.connection.unexport(path)
  }

  /// Comes back in range after ``vanish()``: heard again while the app scans.
  public func reappear() {
    let host = state.update { state -> SimulationHost? in
      state.vanished = false
      return state.host
    }
    host?.hear(self)
  }

  // MARK: The simulation's side

  /// The device's object path, as bluetoothd names it.
  var path: ObjectPath {
    SimulationHost.adapterPath.appending(
      "dev_"
        + address.rawValue.split(separator: ":").joined(separator: "_"))
  }

  func attach(to host: SimulationHost) {
    state.update { $0.host = host }
  }

  /// Exports the device object if the app's scan would hear it (called by the host).
  func heard(filter: Set<BluetoothUUID>) {
    let host = state.update { state -> SimulationHost? in
      guard !state.vanished, !state.exported, let host = state.host else { return nil }
      if !filter.isEmpty, filter.isDisjoint(with: state.advertisement.serviceUUIDs) { return nil }
      state.exported = true
      return host
    }
    guard let host else { return }
    try? host.connection.export(ExportedObject(interfaces: [deviceInterface()]), at: path)
  }

  func emit(_ path: ObjectPath, _ interface: InterfaceName, _ changed: [String: DBusValue]) {
    guard let host = state.read(\.host) else { return }
    try? host.connection.emitPropertiesChanged(path: path, interface: interface, changed: changed)
  }

  func record(_ write: SimulatedWrite) {
    state.update { $0.writes.append(write) }
    writeContinuation.yield(write)
  }

  deinit { writeContinuation.finish() }
}
