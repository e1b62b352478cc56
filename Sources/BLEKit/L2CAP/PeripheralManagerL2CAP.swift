// PeripheralManager's L2CAP side: publishing a channel on the manager's adapter, and the
// service that tells centrals its PSM.
import BlueZ
import Bluetooth
import DBus

extension PeripheralManager {
  /// Publishes an L2CAP LE channel on this manager's adapter (CoreBluetooth's
  /// `publishL2CAPChannel(withEncryption:)`): the kernel picks a dynamic PSM unless `psm` is
  /// given. Centrals find the PSM through a characteristic such as ``L2CAPPSMService``'s.
  ///
  /// The channel itself is the kernel's (an L2CAP socket); bluetoothd only tells which
  /// address the adapter has.
  public func publishL2CAPChannel(
    psm: L2CAPPSM? = nil, requireEncryption: Bool = false
  ) async throws(BluetoothError) -> L2CAPListener {
    let (address, type) = adapterAddress()
    return try L2CAPListener.listen(
      on: address, addressType: type ?? .public, psm: psm, requireEncryption: requireEncryption)
  }

  /// The adapter's `Address` and `AddressType` (`org.bluez.Adapter1`) as the manager's object
  /// tree holds them; nil where unreadable.
  func adapterAddress() -> (BluetoothAddress?, AddressType?) {
    guard let adapter = try? objects.proxy(Adapter1.self, at: adapterPath) else {
      return (nil, nil)
    }
    return (
      adapter[Adapter1.address].flatMap(BluetoothAddress.init(rawValue:)),
      adapter[Adapter1.addressType].flatMap(AddressType.init(rawValue:))
    )
  }
}

/// A service holding Apple's L2CAP PSM characteristic
/// (`ABDD3056-28FA-441D-A470-55A75A52553A`, read only, the PSM as a little-endian UInt16),
/// as CoreBluetooth apps publish it next to an L2CAP channel, so that an iPhone app or
/// ``Peripheral/l2capPSM()`` finds the channel. Publish it with ``PeripheralManager/add(_:)``.
public final class L2CAPPSMService: Sendable {
  /// The service (`BlekitUUID.l2capService` unless given).
  public let service: MutableService
  /// The PSM characteristic.
  public let characteristic: MutableCharacteristic

  /// With `requireEncryption` the characteristic is `encrypt-read`.
  public init(
    psm: L2CAPPSM, service uuid: BluetoothUUID = BlekitUUID.l2capService,
    requireEncryption: Bool = false
  ) {
    characteristic = MutableCharacteristic(
      type: BlekitUUID.l2capPSMCharacteristic, properties: [.read],
      value: psm.characteristicValue,
      permissions: requireEncryption ? [.readable, .readEncryptionRequired] : [.readable])
    service = MutableService(type: uuid, characteristics: [characteristic])
  }
}
