// The central's L2CAP side: finding a peripheral's PSM through Apple's PSM characteristic,
// and opening a channel to a peripheral bluetoothd knows.
import BlueZ
import Bluetooth

extension Peripheral {
  /// Reads Apple's L2CAP PSM characteristic (`ABDD3056-28FA-441D-A470-55A75A52553A`) in
  /// whichever service holds it; nil when the peripheral has none.
  ///
  /// - Throws: `BluetoothError` with `attributeNotFound` when its value is not 2 bytes holding an
  ///   LE PSM, or the read's error.
  public func l2capPSM() async throws(BluetoothError) -> L2CAPPSM? {
    for service in try await services() {
      let found = try await characteristics([BlekitUUID.l2capPSMCharacteristic], for: service)
      guard let characteristic = found.first else { continue }
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
  ) async throws(L2CAPError) -> L2CAPChannel {
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
  ) async throws(L2CAPError) -> L2CAPChannel {
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
