// Peripheral: a connected remote device: its services, characteristics, reads and writes.
import BlueZ
import Bluetooth
import DBus

/// A connected peripheral (CoreBluetooth's `CBPeripheral`), returned by
/// ``CentralManager/connect(to:timeout:retry:)``.
///
/// bluetoothd discovers all services when it connects; the discovery methods here read the
/// resolved tree and filter it by UUID. Notifications are in ``notifications(for:preferAcquire:)``.
public final class Peripheral: Sendable {
  /// Which peripheral this is.
  public let identifier: PeripheralIdentifier
  /// The manager that connected it.
  public let manager: CentralManager
  /// How long lookups wait for bluetoothd's late exports (see ``lookingUntilExported``);
  /// bluetoothd's own pace unless a test gives another.
  let exportWait: ExportWait

  init(
    identifier: PeripheralIdentifier, manager: CentralManager,
    exportWait: ExportWait = .bluetoothd
  ) {
    self.identifier = identifier
    self.manager = manager
    self.exportWait = exportWait
  }

  var objects: BlueZObjectTree { manager.objects }

  /// A fresh Device1 proxy, or `peripheralNotFound`.
  func device() async throws(BluetoothError) -> Device1 {
    guard let device = try? objects.proxy(Device1.self, at: identifier.path) else {
      throw BluetoothError(.peripheralNotFound, "bluetoothd no longer knows \(identifier)")
    }
    return device
  }

  /// Whether the peripheral is connected right now.
  public func isConnected() async -> Bool {
    guard let device = try? await device() else { return false }
    return Self.isConnected(device)
  }

  /// `Connected`, or `ServicesResolved` (true only while connected): bluetoothd 5.66 can
  /// leave `Connected` unsignalled for a link it set up when the peer's own ATT connection
  /// races the connection event, while it does signal the services.
  static func isConnected(_ device: Device1) -> Bool {
    device[Device1.connected] == true || device[Device1.servicesResolved] == true
  }

  /// The name bluetoothd knows, if any: the advertised (or cached) name before a connection;
  /// once connected, bluetoothd replaces it with the GAP Device Name the peripheral serves
  /// (0x2A00), which may differ.
  public func name() async -> String? {
    (try? await device())?[Device1.name]
  }

  func requireResolved() async throws(BluetoothError) {
    let device = try await device()
    guard Self.isConnected(device) else {
      throw BluetoothError(.disconnected, "\(identifier) is not connected")
    }
    if device[Device1.servicesResolved] != true {
      try await manager.waitForServicesResolved(identifier, deadline: .now + .seconds(30))
    }
  }

  // MARK: Discovery

  /// The peripheral's services, all or those with the given UUIDs (CoreBluetooth's
  /// `discoverServices(_:)`), in handle order.
  ///
  /// When some of the given UUIDs are missing, it looks again until bluetoothd has finished
  /// exporting the device's objects: bluetoothd 5.66 reports a known device's services as
  /// resolved before it exports those of a database that changed since (at most 3 s). Asked
  /// for all services (`nil`), it cannot tell a complete list from a partial one, so it always
  /// returns once the device's objects have been quiet for 300 ms (bluetoothd 5.66 exports a
  /// changed database's objects one after another within a few hundred milliseconds).
  public func services(_ uuids: [BluetoothUUID]? = nil) async throws(BluetoothError)
    -> [RemoteService]
  {
    try await requireResolved()
    let wanted = uuids.map(Set.init)
    return await lookingUntilExported(
      { resolvedServices(wanted) },
      isComplete: { found in wanted.map { $0.isSubset(of: found.map(\.uuid)) } ?? false })
  }

  /// The characteristics of `service`, all or those with the given UUIDs (CoreBluetooth's
  /// `discoverCharacteristics(_:for:)`); looked for again as ``services(_:)`` does.
  public func characteristics(
    _ uuids: [BluetoothUUID]? = nil, for service: RemoteService
  ) async throws(BluetoothError) -> [RemoteCharacteristic] {
    try await requireResolved()
    let wanted = uuids.map(Set.init)
    return await lookingUntilExported(
      { resolvedCharacteristics(wanted, of: service) },
      isComplete: { found in wanted.map { $0.isSubset(of: found.map(\.uuid)) } ?? true })
  }

  /// The services bluetoothd exports for this device now, those in `wanted` when given.
  func resolvedServices(_ wanted: Set<BluetoothUUID>?) -> [RemoteService] {
    objects.proxies(GattService1.self, under: identifier.path).compactMap { proxy in
      guard proxy[GattService1.device] == identifier.path,
        let uuid = proxy[GattService1.uuid].flatMap({ try? BluetoothUUID($0) }),
        wanted?.contains(uuid) ?? true
      else { return nil }
      return RemoteService(
        uuid: uuid, isPrimary: proxy[GattService1.primary] ?? true, path: proxy.path)
    }
  }

  /// The characteristics bluetoothd exports for `service` now, those in `wanted` when given.
  func resolvedCharacteristics(_ wanted: Set<BluetoothUUID>?, of service: RemoteService)
    -> [RemoteCharacteristic]
  {
    objects.proxies(GattCharacteristic1.self, under: service.path).compactMap { proxy in
      guard proxy[GattCharacteristic1.service] == service.path,
        let uuid = proxy[GattCharacteristic1.uuid].flatMap({ try? BluetoothUUID($0) }),
        wanted?.contains(uuid) ?? true
      else { return nil }
      let flags = proxy[GattCharacteristic1.flags] ?? []
      return RemoteCharacteristic(
        uuid: uuid, properties: CharacteristicProperties(remoteFlags: flags), flags: flags,
        service: service.path, path: proxy.path)
    }
  }

  /// The descriptors of `characteristic` (CoreBluetooth's `discoverDescriptors(for:)`).
  public func descriptors(for characteristic: RemoteCharacteristic) async throws(BluetoothError)
    -> [RemoteDescriptor]
  {
    try await requireResolved()
    return objects.proxies(GattDescriptor1.self, under: characteristic.path).compactMap {
      proxy in
      guard proxy[GattDescriptor1.characteristic] == characteristic.path,
        let uuid = proxy[GattDescriptor1.uuid].flatMap({ try? BluetoothUUID($0) })
      else { return nil }
      return RemoteDescriptor(uuid: uuid, characteristic: characteristic.path, path: proxy.path)
    }
  }

  // MARK: Values

  func proxy(for characteristic: RemoteCharacteristic) async throws(BluetoothError)
    -> GattCharacteristic1
  {
    guard let proxy = try? objects.proxy(GattCharacteristic1.self, at: characteristic.path)
    else {
      throw BluetoothError(
        await isConnected() ? .attributeNotFound : .disconnected,
        "characteristic \(characteristic.uuid) of \(identifier) is gone")
    }
    return proxy
  }

  /// Reads a characteristic's value (CoreBluetooth's `readValue(for:)`).
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.ReadValue`.
  public func readValue(for characteristic: RemoteCharacteristic) async throws(BluetoothError)
    -> [UInt8]
  {
    let proxy = try await proxy(for: characteristic)
    do throws(BlueZError) {
      return try await proxy.readValue()
    } catch {
      throw BluetoothError(error, while: "reading \(characteristic.uuid)")
    }
  }

  /// Reads a descriptor's value.
  /// The corresponding D-Bus member is `org.bluez.GattDescriptor1.ReadValue`.
  public func readValue(for descriptor: RemoteDescriptor) async throws(BluetoothError) -> [UInt8] {
    guard let proxy = try? objects.proxy(GattDescriptor1.self, at: descriptor.path) else {
      throw BluetoothError(.attributeNotFound, "descriptor \(descriptor.uuid) is gone")
    }
    do throws(BlueZError) {
      return try await proxy.readValue()
    } catch {
      throw BluetoothError(error, while: "reading descriptor \(descriptor.uuid)")
    }
  }

  /// Writes a descriptor's value with a write request (CoreBluetooth's `writeValue(_:for:)` for
  /// a descriptor), e.g. a writable Characteristic User Description (0x2901). bluetoothd keeps
  /// the Client Characteristic Configuration (0x2902) to itself: subscribe with
  /// ``notifications(for:preferAcquire:)`` instead.
  /// The corresponding D-Bus member is `org.bluez.GattDescriptor1.WriteValue`.
  public func writeValue(_ value: [UInt8], for descriptor: RemoteDescriptor)
    async throws(BluetoothError)
  {
    guard value.count <= 512 else {
      throw BluetoothError(
        .notSupported, "a value of \(value.count) bytes exceeds the 512 bytes an attribute holds")
    }
    guard let proxy = try? objects.proxy(GattDescriptor1.self, at: descriptor.path) else {
      throw BluetoothError(
        await isConnected() ? .attributeNotFound : .disconnected,
        "descriptor \(descriptor.uuid) of \(identifier) is gone")
    }
    do throws(BlueZError) {
      try await proxy.writeValue(value)
    } catch {
      throw BluetoothError(error, while: "writing descriptor \(descriptor.uuid)")
    }
  }

  /// Writes a characteristic's value (CoreBluetooth's `writeValue(_:for:type:)`): a write
  /// request, or a write command for `.withoutResponse`.
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.WriteValue`.
  public func writeValue(
    _ value: [UInt8], for characteristic: RemoteCharacteristic,
    type: CharacteristicWriteType = .withResponse
  ) async throws(BluetoothError) {
    let limit = await maximumWriteValueLength(for: type, characteristic: characteristic)
    guard value.count <= limit else {
      throw BluetoothError(
        .notSupported,
        "a value of \(value.count) bytes exceeds the \(limit)-byte limit for this write")
    }
    let proxy = try await proxy(for: characteristic)
    do throws(BlueZError) {
      try await proxy.writeValue(value, type: type == .withResponse ? .request : .command)
    } catch {
      throw BluetoothError(error, while: "writing \(characteristic.uuid)")
    }
  }

  /// Opens a socket for writes without response to `characteristic` (bluetoothd's
  /// AcquireWrite): a stream of write commands without a D-Bus call per value, with
  /// back-pressure. See ``WriteWithoutResponseChannel``.
  ///
  /// - Throws: ``BluetoothError`` `.notSupported` when the characteristic has no
  ///   write-without-response property, `.notPermitted` when another client holds its
  ///   channel, `.disconnected` when the link is down.
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.AcquireWrite`.
  public func openWriteWithoutResponseChannel(for characteristic: RemoteCharacteristic)
    async throws(BluetoothError) -> WriteWithoutResponseChannel
  {
    guard characteristic.properties.contains(.writeWithoutResponse) else {
      throw BluetoothError(
        .notSupported, "characteristic \(characteristic.uuid) takes no writes without response")
    }
    let proxy = try await proxy(for: characteristic)
    let acquired: AcquiredSocket
    do throws(BlueZError) {
      acquired = try await proxy.acquireWrite()
    } catch {
      throw BluetoothError(error, while: "opening a write channel to \(characteristic.uuid)")
    }
    guard let fd = acquired.fileDescriptor.take() else {
      throw BluetoothError(.bus, "AcquireWrite on \(characteristic.uuid) returned no socket")
    }
    return WriteWithoutResponseChannel(
      characteristic: characteristic, fd: fd, mtu: Int(acquired.mtu))
  }

  /// The ATT MTU of the link as bluetoothd reports it on the characteristic (`MTU`), or 23
  /// (the minimum) when unknown.
  public func mtu(for characteristic: RemoteCharacteristic) async -> Int {
    reportedMTU(for: characteristic) ?? 23
  }

  /// The ATT MTU bluetoothd reports on the characteristic (`MTU`), or `nil` when it reports
  /// none (older bluetoothd, or a characteristic it never updated).
  public func reportedMTU(for characteristic: RemoteCharacteristic) -> Int? {
    let proxy = try? objects.proxy(GattCharacteristic1.self, at: characteristic.path)
    return proxy?[GattCharacteristic1.mtu].map(Int.init)
  }

  /// The longest value one write can carry (CoreBluetooth's `maximumWriteValueLength(for:)`):
  /// 512 for a write request (BlueZ uses long writes as needed), min(MTU - 3, 512) for a write
  /// command.
  public func maximumWriteValueLength(
    for type: CharacteristicWriteType, characteristic: RemoteCharacteristic
  ) async -> Int {
    switch type {
    case .withResponse: return 512
    case .withoutResponse: return min(max(await mtu(for: characteristic) - 3, 20), 512)
    }
  }

  /// Disconnects (CoreBluetooth's `cancelPeripheralConnection`).
  public func disconnect() async throws(BluetoothError) {
    try await manager.disconnect(identifier)
  }

  /// Disconnects on the way out, whatever happened before: also when the calling task was
  /// cancelled (Ctrl-C), where ``disconnect()`` alone would send nothing. Waits at most
  /// `limit`; errors are ignored (nothing is left to undo). See `runCleanup(within:_:)`.
  public func disconnectOnExit(within limit: Duration = defaultCleanupLimit) async {
    await runCleanup(within: limit) { try? await self.disconnect() }
  }
}
