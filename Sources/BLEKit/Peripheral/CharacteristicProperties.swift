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

/// Who may read and write a characteristic's or descriptor's value (CoreBluetooth's
/// `CBAttributePermissions`, same bit values for its four; the higher four are BlueZ's).
///
/// BlueZ has no separate permissions: what a central may do is set by the characteristic's
/// ``CharacteristicProperties``, so `.readable` and `.writeable` change nothing (a
/// characteristic without `.read` is not readable whatever its permissions say). The
/// requirements do, each becoming one of BlueZ's `Flags` (`org.bluez.GattCharacteristic1`),
/// and only on an access the properties allow:
///
/// | Permission | BlueZ flag | bluetoothd refuses the access unless the link is |
/// |---|---|---|
/// | `.readEncryptionRequired` | `encrypt-read` | encrypted (the central paired) |
/// | `.writeEncryptionRequired` | `encrypt-write` | encrypted |
/// | `.readAuthenticationRequired` | `encrypt-authenticated-read` | encrypted with an authenticated (MITM-protected) key |
/// | `.writeAuthenticationRequired` | `encrypt-authenticated-write` | idem |
/// | `.readSecureConnectionsRequired` | `secure-read` | encrypted by LE Secure Connections |
/// | `.writeSecureConnectionsRequired` | `secure-write` | idem |
public struct AttributePermissions: OptionSet, Sendable, Hashable {
  public let rawValue: UInt8
  public init(rawValue: UInt8) { self.rawValue = rawValue }

  public static let readable = AttributePermissions(rawValue: 0x01)
  public static let writeable = AttributePermissions(rawValue: 0x02)
  /// Reads need an encrypted (paired) link: `encrypt-read`.
  public static let readEncryptionRequired = AttributePermissions(rawValue: 0x04)
  /// Writes need an encrypted (paired) link: `encrypt-write`.
  public static let writeEncryptionRequired = AttributePermissions(rawValue: 0x08)
  /// Reads need an authenticated (MITM-protected) pairing: `encrypt-authenticated-read`.
  public static let readAuthenticationRequired = AttributePermissions(rawValue: 0x10)
  /// Writes need an authenticated (MITM-protected) pairing: `encrypt-authenticated-write`.
  public static let writeAuthenticationRequired = AttributePermissions(rawValue: 0x20)
  /// Reads need LE Secure Connections: `secure-read`.
  public static let readSecureConnectionsRequired = AttributePermissions(rawValue: 0x40)
  /// Writes need LE Secure Connections: `secure-write`.
  public static let writeSecureConnectionsRequired = AttributePermissions(rawValue: 0x80)

  /// BlueZ's flags for these requirements on an attribute that can be read (`readable`)
  /// and/or written (`writable`).
  func gattFlags(readable: Bool, writable: Bool) -> [GattFlag] {
    var flags: [GattFlag] = []
    if readable {
      if contains(.readEncryptionRequired) { flags.append(.encryptRead) }
      if contains(.readAuthenticationRequired) { flags.append(.encryptAuthenticatedRead) }
      if contains(.readSecureConnectionsRequired) { flags.append(.secureRead) }
    }
    if writable {
      if contains(.writeEncryptionRequired) { flags.append(.encryptWrite) }
      if contains(.writeAuthenticationRequired) { flags.append(.encryptAuthenticatedWrite) }
      if contains(.writeSecureConnectionsRequired) { flags.append(.secureWrite) }
    }
    return flags
  }
}

extension CharacteristicProperties {
  /// BlueZ's `Flags` for these properties and permissions.
  ///
  /// A requirement applies only to an access the properties allow: `readEncryptionRequired`
  /// on a readable characteristic becomes `encrypt-read` (likewise for writes, and for the
  /// authenticated and Secure Connections requirements), so bluetoothd refuses the access on a
  /// link that does not meet it.
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
    flags += permissions.gattFlags(
      readable: contains(.read), writable: contains(.write) || contains(.writeWithoutResponse))
    return flags
  }
}
