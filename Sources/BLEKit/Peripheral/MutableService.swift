// A service a PeripheralManager publishes (CoreBluetooth's CBMutableService).
import Bluetooth

/// A service to publish with ``PeripheralManager/add(_:)``: a UUID, primary or not, and its
/// characteristics (fixed at creation, so the value can be shared across tasks).
public final class MutableService: Sendable, CustomStringConvertible {
  public let uuid: BluetoothUUID
  public let isPrimary: Bool
  public let characteristics: [MutableCharacteristic]

  public init(
    type uuid: BluetoothUUID, primary: Bool = true, characteristics: [MutableCharacteristic]
  ) {
    self.uuid = uuid
    self.isPrimary = primary
    self.characteristics = characteristics
  }

  public var description: String { "service \(uuid)" }
}
