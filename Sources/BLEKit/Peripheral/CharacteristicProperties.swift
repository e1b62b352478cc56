// CoreBluetooth's characteristic properties and attribute permissions, mapped to BlueZ flags.
import BlueZ

/// What a central may do with a characteristic (CoreBluetooth's `CBCharacteristicProperties`).
public struct CharacteristicProperties: OptionSet, Sendable, Hashable {
  public let rawValue: UInt8
  public init(rawValue: UInt8) { self.rawValue = rawValue }

  public static let broadcast = CharacteristicProperties(rawValue: 0x01)
  public static let read = CharacteristicProperties(rawValue: 0x02)
  public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
  public static let write = CharacteristicProperties(rawValue: 0x08)
  public static let notify = CharacteristicProperties(rawValue: 0x10)
  public static let indicate = CharacteristicProperties(rawValue: 0x20)
  public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
  /// Notifications only over an encrypted link.
  public static let notifyEncryptionRequired = CharacteristicProperties(rawValue: 0x80)
}

/// Who may read and write a characteristic's value (CoreBluetooth's `CBAttributePermissions`).
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
    if contains(.notifyEncryptionRequired) { flags.append(.encryptNotify) }
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
