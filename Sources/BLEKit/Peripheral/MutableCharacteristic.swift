// A characteristic a PeripheralManager publishes (CoreBluetooth's CBMutableCharacteristic).
import Bluetooth

/// A characteristic to publish with ``PeripheralManager/add(_:)``.
///
/// Its identity (the object) is what ``PeripheralManager/updateValue(_:for:)`` and
/// ``PeripheralManager/send(_:for:)`` take. As in CoreBluetooth, a characteristic with a fixed
/// `value` is read-only and served by the library (offsets included); otherwise reads go to
/// `onRead`, which returns the whole current value (the library applies the request's offset
/// and answers `InvalidOffset` past the end).
public final class MutableCharacteristic: Sendable, CustomStringConvertible {
  public let uuid: BluetoothUUID
  public let properties: CharacteristicProperties
  public let permissions: AttributePermissions
  /// A fixed value, or nil for a value produced per read by ``onRead``.
  public let value: [UInt8]?
  public let descriptors: [MutableDescriptor]
  /// Produces the value for a read request; throw to refuse it (e.g.
  /// `throw .att(.readNotPermitted)`; any other error answers Unlikely Error).
  public let onRead: (@Sendable (ATTReadRequest) async throws(BluetoothError) -> [UInt8])?
  /// Vets a write before it is accepted (and delivered as
  /// ``PeripheralManagerEvent/write(_:)``); throw to refuse it (``BluetoothError/att(_:_:)``). Nil accepts every write.
  public let onWrite: (@Sendable (ATTWriteRequest) async throws(BluetoothError) -> Void)?
  /// Notify through the socket bluetoothd hands out with `AcquireNotify` (true, the default:
  /// real back-pressure) or through `PropertiesChanged(Value)` with pacing (false).
  public let usesNotifySocket: Bool

  public init(
    type uuid: BluetoothUUID, properties: CharacteristicProperties, value: [UInt8]? = nil,
    permissions: AttributePermissions, descriptors: [MutableDescriptor] = [],
    usesNotifySocket: Bool = true,
    onRead: (@Sendable (ATTReadRequest) async throws(BluetoothError) -> [UInt8])? = nil,
    onWrite: (@Sendable (ATTWriteRequest) async throws(BluetoothError) -> Void)? = nil
  ) {
    self.uuid = uuid
    self.properties = properties
    self.value = value
    self.permissions = permissions
    self.descriptors = descriptors
    self.usesNotifySocket = usesNotifySocket
    self.onRead = onRead
    self.onWrite = onWrite
  }

  public var description: String { "characteristic \(uuid)" }

  /// True when centrals can subscribe.
  public var canNotify: Bool { properties.contains(.notify) || properties.contains(.indicate) }
}
