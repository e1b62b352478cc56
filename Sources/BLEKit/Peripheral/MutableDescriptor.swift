// A descriptor a PeripheralManager publishes (CoreBluetooth's CBMutableDescriptor), fixed or
// writable, with helpers for the User Description and Presentation Format descriptors.
import Bluetooth
import Synchronization

/// A descriptor of a ``MutableCharacteristic`` (CoreBluetooth's `CBMutableDescriptor`), e.g. a
/// Characteristic User Description (0x2901). BlueZ adds the Client Characteristic
/// Configuration descriptor by itself: do not declare 0x2902.
///
/// A read-only descriptor serves its `value` (offsets included). A writable one starts with
/// `value`; an accepted write replaces it (later reads return it), after `onWrite` vetted it,
/// and is reported as ``PeripheralManagerEvent/write(_:)`` with
/// ``ATTWriteRequest/descriptor`` set.
public struct MutableDescriptor: Sendable, Hashable {
  public let uuid: BluetoothUUID
  /// The value the descriptor starts with.
  public let value: [UInt8]
  /// True when centrals may write the descriptor.
  public let isWritable: Bool
  /// Encryption or authentication requirements (``AttributePermissions``); `.readable` and
  /// `.writeable` change nothing, as for characteristics.
  public let permissions: AttributePermissions
  /// Vets a write before it is accepted; throw to refuse it. Nil accepts every write.
  public let onWrite: (@Sendable (ATTWriteRequest) async throws(BluetoothError) -> Void)?
  /// The current value, shared by the copies of this descriptor.
  let current: DescriptorValue

  /// A descriptor holding `value`; with `writable`, centrals may replace it.
  public init(
    type uuid: BluetoothUUID, value: [UInt8], writable: Bool = false,
    permissions: AttributePermissions = [],
    onWrite: (@Sendable (ATTWriteRequest) async throws(BluetoothError) -> Void)? = nil
  ) {
    self.uuid = uuid
    self.value = value
    self.isWritable = writable
    self.permissions = permissions
    self.onWrite = onWrite
    self.current = DescriptorValue(value)
  }

  /// The descriptor's value now: the last accepted write, or ``value``.
  public var currentValue: [UInt8] { current.get() }

  /// A Characteristic User Description (0x2901) holding `text`; `writable` makes it the
  /// "writable auxiliaries" kind a central may rename.
  public static func userDescription(_ text: String, writable: Bool = false) -> MutableDescriptor {
    MutableDescriptor(
      type: BluetoothUUID(uint16: 0x2901), value: Array(text.utf8), writable: writable)
  }

  /// A Characteristic Presentation Format (0x2904) saying how to read the value.
  public static func presentationFormat(_ format: PresentationFormat) -> MutableDescriptor {
    MutableDescriptor(type: BluetoothUUID(uint16: 0x2904), value: format.bytes)
  }

  public static func == (lhs: MutableDescriptor, rhs: MutableDescriptor) -> Bool {
    lhs.uuid == rhs.uuid && lhs.value == rhs.value && lhs.isWritable == rhs.isWritable
      && lhs.permissions == rhs.permissions && lhs.current === rhs.current
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(uuid)
    hasher.combine(value)
    hasher.combine(isWritable)
  }
}

/// The value of a writable descriptor, shared across copies of its ``MutableDescriptor``.
final class DescriptorValue: Sendable {
  private let value: Mutex<[UInt8]>
  init(_ value: [UInt8]) { self.value = Mutex(value) }
  func get() -> [UInt8] { value.withLock { $0 } }
  func set(_ bytes: [UInt8]) { value.withLock { $0 = bytes } }
}

/// The seven bytes of a Characteristic Presentation Format descriptor (0x2904): the value's
/// format, its decimal exponent, its unit, and a description within a namespace (Core
/// Specification Supplement; Vol 3 Part G 3.3.3.5).
public struct PresentationFormat: Sendable, Hashable {
  /// The format byte, e.g. ``uint8`` (0x04) or ``utf8`` (0x19).
  public var format: UInt8
  /// The value is `value * 10^exponent`.
  public var exponent: Int8
  /// The unit's 16-bit UUID, e.g. 0x27AD for percentage, 0x272F for degrees Celsius;
  /// 0x2700 is "unitless".
  public var unit: UInt16
  /// 1 is the Bluetooth SIG namespace.
  public var namespace: UInt8
  /// The description within the namespace (0 is "unknown").
  public var formatDescription: UInt16

  public init(
    format: UInt8, exponent: Int8 = 0, unit: UInt16 = 0x2700, namespace: UInt8 = 1,
    formatDescription: UInt16 = 0
  ) {
    self.format = format
    self.exponent = exponent
    self.unit = unit
    self.namespace = namespace
    self.formatDescription = formatDescription
  }

  /// The descriptor's value, little-endian as ATT sends it.
  public var bytes: [UInt8] {
    [
      format, UInt8(bitPattern: exponent), UInt8(unit & 0xFF), UInt8(unit >> 8), namespace,
      UInt8(formatDescription & 0xFF), UInt8(formatDescription >> 8),
    ]
  }

  public static let boolean: UInt8 = 0x01
  public static let uint8: UInt8 = 0x04
  public static let uint16: UInt8 = 0x06
  public static let uint32: UInt8 = 0x08
  public static let sint8: UInt8 = 0x0C
  public static let sint16: UInt8 = 0x0E
  public static let sint32: UInt8 = 0x10
  public static let float32: UInt8 = 0x14
  public static let utf8: UInt8 = 0x19
  public static let opaque: UInt8 = 0x1B
}
