// Finding one peripheral by address or name (scanning as needed), and forgetting a cached one.
import BlueZ
import Bluetooth

/// Which peripheral a command means: an address, or the name it advertises.
public enum PeripheralTarget: Sendable, Hashable, CustomStringConvertible {
  /// A device address, e.g. `00:AA:01:01:00:01`.
  case address(BluetoothAddress)
  /// An advertised (or cached) name, matched exactly.
  case name(String)

  public var description: String {
    switch self {
    case .address(let address): address.rawValue
    case .name(let name): "\"\(name)\""
    }
  }

  /// Whether a discovery is this target.
  public func matches(_ discovery: Discovery) -> Bool {
    switch self {
    case .address(let address): discovery.address == address
    case .name(let name): discovery.name == name
    }
  }
}

extension CentralManager {
  /// Finds a peripheral on this manager's adapter.
  ///
  /// An address bluetoothd already knows is returned at once. Otherwise this scans (no filter,
  /// LE) until a device with that address or exactly that name is reported; devices
  /// bluetoothd already knows count as reported when the scan starts.
  /// - Throws: ``BluetoothError/Code/timeout`` when nothing matched within `timeout`; the
  ///   state's error when not powered on.
  public func find(_ target: PeripheralTarget, timeout: Duration) async throws(BluetoothError)
    -> PeripheralIdentifier
  {
    try requirePoweredOn()
    if case .address(let address) = target, let known = await peripheral(address: address) {
      return known
    }
    let deadline = ContinuousClock.now + timeout
    guard let found = try await scan(for: target, until: deadline) else {
      throw BluetoothError(
        .timeout, "no device \(target) was seen on \(adapterName) within \(roughSeconds(timeout))")
    }
    return found
  }

  /// The ``ScanOptions/restartInterval`` of ``find(_:timeout:)``'s scan. Linux (6.1) drops an
  /// advertising report that arrives before it has marked the discovery as started, and the
  /// controller's duplicate filter then holds that advertiser back until the next scan enable,
  /// which the kernel itself makes only every 10.24 s (`DISCOV_LE_TIMEOUT`); a restart every
  /// 4 s bounds that wait for the one device a find looks for.
  /// ``TransferCentral/findPeer(rssi:timeout:)`` asks for no restart (see there).
  static let findRestart: Duration = .seconds(4)

  /// One discovery session looking for `target` until `deadline`, restarted every
  /// ``findRestart``; `nil` when it was not seen. Starting the scan counts against `deadline`
  /// too: a start that never ends (a reply that never comes) ends at the deadline, not later.
  private func scan(for target: PeripheralTarget, until deadline: ContinuousClock.Instant)
    async throws(BluetoothError) -> PeripheralIdentifier?
  {
    // Every report counts (a known device's name may change with a new advertisement).
    let options = ScanOptions(
      allowDuplicates: true, restartInterval: Self.findRestart, timeout: deadline - .now)
    do {
      return try await withThrowingTaskGroup(of: PeripheralIdentifier?.self) { group in
        group.addTask {
          let discoveries = try await self.startFindScan(options)
          for try await discovery in discoveries where target.matches(discovery) {
            return discovery.peripheral
          }
          return nil
        }
        group.addTask {
          try await Task.sleep(until: deadline)
          return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
      }
    } catch let error as BluetoothError {
      throw error
    } catch is CancellationError {
      throw BluetoothError(.cancelled, "finding \(target) was cancelled")
    } catch {
      throw BluetoothError(.system, "finding \(target): \(error)")
    }
  }

  /// Starts the scan of ``find(_:timeout:)``, waiting out another scan of this manager (or the
  /// StopDiscovery round trip of one that is ending; seconds on a loaded machine), up to
  /// ``scanSlotLimit`` each time; the find's deadline bounds the whole.
  private func startFindScan(_ options: ScanOptions) async throws(BluetoothError)
    -> DiscoveryStream
  {
    while true {
      do throws(BluetoothError) {
        return try await scan(options)
      } catch  where error.code == .scanInProgress && !Task.isCancelled {
        guard await scanSlotFrees(within: Self.scanSlotLimit) else { throw error }
      }
    }
  }

  /// How long a find waits for a scan already running on the manager to end.
  static let scanSlotLimit: Duration = .seconds(10)

  /// Removes a peripheral from bluetoothd's cache (its services, characteristics and any
  /// bonding), disconnecting it first, and waits until the object is gone. The next scan
  /// finds it afresh and the next connection discovers its services again.
  /// The corresponding D-Bus member is `org.bluez.Adapter1.RemoveDevice`.
  public func forget(_ peripheral: PeripheralIdentifier, timeout: Duration = .seconds(10))
    async throws(BluetoothError)
  {
    let adapter = try await adapter()
    let (snapshot, _, events) = objects.subscribe()
    guard snapshot[peripheral.path]?[Device1.interface] != nil else { return }
    try? await disconnect(peripheral, timeout: timeout)
    let path = peripheral.path
    do throws(BlueZError) {
      try await adapter.removeDevice(path)
    } catch  where error.code == .doesNotExist {
      return
    } catch {
      throw BluetoothError(error, while: "removing \(peripheral) from \(adapterName)")
    }
    let removed =
      await firstMatch(in: events, within: timeout) { event -> Bool? in
        switch event {
        case .interfacesRemoved(let removed, let names)
        where removed == path && names.contains(Device1.interface):
          true
        case .serviceStopped: true
        default: nil
        }
      } ?? false
    if !removed, objects.objects[path]?[Device1.interface] != nil {
      throw BluetoothError(
        .timeout, "bluetoothd did not remove \(peripheral) within \(roughSeconds(timeout))")
    }
  }
}

/// A duration for messages, to a tenth of a second: `19.6 s`.
func roughSeconds(_ duration: Duration) -> String {
  let tenths = Int(
    (Double(duration.components.seconds) * 10
      + Double(duration.components.attoseconds) / 1e17).rounded())
  return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
}
