// CoreBluetooth's characteristic properties and attribute permissions, mapped to BlueZ flags.
import BlueZ

/// What a central may do with a characteristic (CoreBluetooth's `CBCharacteristicProperties`,
/// with the same bit values: `[.read, .notify]` is `0x12`, `.notifyEncryptionRequired` is
/// `0x100`).
public struct CharacteristicProperties: OptionSet, Sendable, Hashable {
  public let rawValue: UInt16
  public init(rawValue: UInt16) { self.rawValue = rawValue }

  public static let broadcast = CharacteristicProperties(rawValue: 0x01)
  public static let read = CharacteristicProperties(rawValue: 0x02)
  public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
  public static let write = CharacteristicProperties(rawValue: 0x08)
  public static let notify = CharacteristicProperties(rawValue: 0x10)
  public static let indicate = CharacteristicProperties(rawValue: 0x20)
  public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
  /// The characteristic has an Extended Properties descriptor (BlueZ adds it: `0x2900`).
  public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)
  /// Notifications only over an encrypted link (BlueZ's `encrypt-notify`).
  public static let notifyEncryptionRequired = CharacteristicProperties(rawValue: 0x100)
  /// Indications only over an encrypted link (BlueZ's `encrypt-indicate`).
  public static let indicateEncryptionRequired = CharacteristicProperties(rawValue: 0x200)
}

/// Who may read and write a characteristic's value (CoreBluetooth's `CBAttributePermissions`,
/// same bit values).
///
/// BlueZ has no separate permissions: what a central may do is set by the characteristic's
/// ``CharacteristicProperties``, so `.readable` and `.writeable` change nothing (a
/// characteristic without `.read` is not readable whatever its permissions say). The
/// encryption requirements do: `.readEncryptionRequired` on a `.read` characteristic becomes
/// BlueZ's `encrypt-read` flag, `.writeEncryptionRequired` on a writable one `encrypt-write`,
/// and bluetoothd then refuses the access on an unencrypted link (the central pairs first).
public struct AttributePermissions: OptionSet, Sendable, Hashable {
  public let rawValue: UInt8
  public init(rawValue: UInt8) { self.rawValue = rawValue }

  public static let readable = AttributePermissions(rawValue: 0x01)
  public static let writeable = AttributePermissions(rawValue: 0x02)
  /// Reads need an encrypted (paired) link.
  public static let readEncryptionRequired = AttributePermissions(rawValue: 0x04)
  /// Writes need an encrypted (paired) link.
  public static let writeEncryptionRequired = AttributePermissions(rawValue: 0x08)
}

extension CharacteristicProperties {
  /// BlueZ's `Flags` for these properties and permissions.
  ///
  /// A readable property with `readEncryptionRequired` becomes `encrypt-read` (likewise for
  /// writes), so bluetoothd refuses the access on an unencrypted link.
  func gattFlags(permissions: AttributePermissions) -> [GattFlag] {
    var flags: [GattFlag] = []
    if contains(.broadcast) { flags.append(.broadcast) }
    if contains(.read) { flags.append(.read) }
    if contains(.writeWithoutResponse) { flags.append(.writeWithoutResponse) }
    if contains(.write) { flags.append(.write) }
    if contains(.notify) { flags.append(.notify) }
    if contains(.indicate) { flags.append(.indicate) }
    if contains(.authenticatedSignedWrites) { flags.append(.authenticatedSignedWrites) }
    if contains(.extendedProperties) { flags.append(.extendedProperties) }
    if contains(.notifyEncryptionRequired) { flags.append(.encryptNotify) }
    if contains(.indicateEncryptionRequired) { flags.append(.encryptIndicate) }
    if permissions.contains(.readEncryptionRequired), contains(.read) {
      flags.append(.encryptRead)
    }
    if permissions.contains(.writeEncryptionRequired),
      contains(.write) || contains(.writeWithoutResponse)
    {
      flags.append(.encryptWrite)
    }
    return flags
  }
}
