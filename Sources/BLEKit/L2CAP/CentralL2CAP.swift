// The central's L2CAP side: finding a peripheral's PSM through Apple's PSM characteristic,
// and opening a channel to a peripheral bluetoothd knows.
import BlueZ
import Bluetooth
import DBus

extension Peripheral {
  /// Reads Apple's L2CAP PSM characteristic (`ABDD3056-28FA-441D-A470-55A75A52553A`) in
  /// whichever service holds it; nil when the peripheral has none.
  ///
  /// A read through a handle the peripheral no longer has (ATT's Invalid Handle: it registered
  /// its services anew since bluetoothd cached them) is tried once more. First bluetoothd gets
  /// 2 s to replace the characteristic's object, as it does when the peripheral's Service
  /// Changed arrives; if it does not, the link is made anew, and bluetoothd checks its cache
  /// against the peripheral's Database Hash again and discovers afresh. (A BlueZ peripheral
  /// updates its hash 100 ms after its services change: a central that connects within that
  /// time reads the old hash, keeps its stale cache, and is told nothing.) A read that still
  /// fails is reported with that explanation: BlueZ 5.66 can keep a service the peripheral
  /// removed while its cached hash matches, and only removing the device from its cache helps.
  /// blekit does not do that itself, since it drops a paired device's keys.
  public func l2capPSM() async throws(BluetoothError) -> L2CAPPSM? {
    var stale: RemoteCharacteristic?
    do throws(BluetoothError) {
      return try await readL2CAPPSM(noting: &stale)
    } catch  where error.attErrorCode == Self.invalidHandle {
      guard let stale else { throw error }
      if await !waitUntilReplaced(stale, within: .seconds(2)) {
        try? await manager.disconnect(identifier)
        _ = try await manager.connect(to: identifier)
      }
      // bluetoothd (5.66) may keep the stale object beside the new one when the peer's
      // Service Changed covers only the new range, so the one that failed is read last.
      var again: RemoteCharacteristic?
      do throws(BluetoothError) {
        return try await readL2CAPPSM(noting: &again, failed: stale.path)
      } catch  where error.attErrorCode == Self.invalidHandle {
        throw BluetoothError(
          error.code,
          "\(error.message) (again after reconnecting: bluetoothd's cache of \(identifier)'s "
            + "services is stale and matches its Database Hash; remove the device from the cache, "
            + "e.g. bluetoothctl remove \(identifier.address), and try again)",
          bluez: error.bluez)
      }
    }
  }

  /// ATT's Invalid Handle error code (Core Vol 3 Part F 3.4.1.1), as a failed read's
  /// ``BluetoothError/attErrorCode``.
  static let invalidHandle: UInt8 = 0x01

  /// Waits until bluetoothd removed `characteristic`'s object or added another with its UUID
  /// under this peripheral, at most `limit`; whether it did.
  private func waitUntilReplaced(_ characteristic: RemoteCharacteristic, within limit: Duration)
    async -> Bool
  {
    let (snapshot, _, events) = objects.subscribe()
    guard snapshot[characteristic.path]?[GattCharacteristic1.interface] != nil else { return true }
    let device = identifier.path.rawValue + "/"
    let uuid = characteristic.uuid
    return await firstMatch(in: events, within: limit) { event -> Bool? in
      switch event {
      case .interfacesRemoved(let path, let names)
      where path == characteristic.path && names.contains(GattCharacteristic1.interface):
        true
      case .interfacesAdded(let path, let interfaces)
      where path.rawValue.hasPrefix(device) && path != characteristic.path:
        interfaces[GattCharacteristic1.interface]?[GattCharacteristic1.uuid.name]?.stringValue
          .flatMap { try? BluetoothUUID($0) } == uuid ? true : nil
      default: nil
      }
    } ?? false
  }

  /// One look for the PSM characteristic, the one at `failed` last; `read` is set to the
  /// characteristic read, if any.
  private func readL2CAPPSM(
    noting read: inout RemoteCharacteristic?, failed: ObjectPath? = nil
  ) async throws(BluetoothError) -> L2CAPPSM? {
    try await requireResolved()
    let candidates = await lookingUntilExported(
      {
        resolvedServices(nil).flatMap {
          resolvedCharacteristics([BlekitUUID.l2capPSMCharacteristic], of: $0)
        }
      }, isComplete: { !$0.isEmpty })
    let ordered = candidates.filter { $0.path != failed } + candidates.filter { $0.path == failed }
    if let characteristic = ordered.first {
      read = characteristic
      let value = try await readValue(for: characteristic)
      guard let psm = L2CAPPSM(characteristicValue: value) else {
        throw BluetoothError(
          .attributeNotFound,
          "\(identifier)'s L2CAP PSM characteristic holds \(value.count) bytes "
            + "(\(value.map { String($0, radix: 16) }.joined(separator: " "))), not an LE PSM")
      }
      return psm
    }
    return nil
  }

  /// Opens an L2CAP channel to `psm` on this peripheral (CoreBluetooth's
  /// `openL2CAPChannel(_:)`), over the link bluetoothd made.
  public func openL2CAPChannel(
    _ psm: L2CAPPSM, requireEncryption: Bool = false, timeout: Duration = .seconds(30)
  ) async throws(BluetoothError) -> L2CAPChannel {
    try await manager.openL2CAPChannel(
      to: identifier, psm: psm, requireEncryption: requireEncryption, timeout: timeout)
  }
}

extension CentralManager {
  /// Opens an L2CAP channel to `psm` on a peripheral bluetoothd knows, from this manager's
  /// adapter, with the address type bluetoothd recorded for it. The kernel makes the LE link
  /// if there is none (the peripheral must be advertising connectably then).
  public func openL2CAPChannel(
    to peripheral: PeripheralIdentifier, psm: L2CAPPSM, requireEncryption: Bool = false,
    timeout: Duration = .seconds(30)
  ) async throws(BluetoothError) -> L2CAPChannel {
    let device = try? objects.proxy(Device1.self, at: peripheral.path)
    let peerType = device?[Device1.addressType].flatMap(AddressType.init(rawValue:)) ?? .public
    let adapter = try? await adapter()
    let local = adapter?[Adapter1.address].flatMap(BluetoothAddress.init(rawValue:))
    let localType = adapter?[Adapter1.addressType].flatMap(AddressType.init(rawValue:)) ?? .public
    return try await L2CAPChannel.open(
      to: peripheral.address, peerType: peerType, psm: psm, from: local, localType: localType,
      requireEncryption: requireEncryption, timeout: timeout)
  }
}
