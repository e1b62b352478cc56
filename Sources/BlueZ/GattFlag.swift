// The access flags of a local characteristic or descriptor, in BlueZ's own spelling.

/// One entry of the `Flags` property of `org.bluez.GattCharacteristic1` or
/// `org.bluez.GattDescriptor1`, e.g. `"write-without-response"` or `"encrypt-read"`.
///
/// BlueZ builds the characteristic's properties byte and the attribute permissions from these.
public struct GattFlag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  public var rawValue: String
  public init(rawValue: String) { self.rawValue = rawValue }
  public var description: String { rawValue }

  public static let broadcast = GattFlag(rawValue: "broadcast")
  public static let read = GattFlag(rawValue: "read")
  /// Write without response (ATT Write Command).
  public static let writeWithoutResponse = GattFlag(rawValue: "write-without-response")
  /// Write with response (ATT Write Request).
  public static let write = GattFlag(rawValue: "write")
  public static let notify = GattFlag(rawValue: "notify")
  public static let indicate = GattFlag(rawValue: "indicate")
  public static let authenticatedSignedWrites = GattFlag(rawValue: "authenticated-signed-writes")
  public static let extendedProperties = GattFlag(rawValue: "extended-properties")
  public static let reliableWrite = GattFlag(rawValue: "reliable-write")
  public static let writableAuxiliaries = GattFlag(rawValue: "writable-auxiliaries")
  public static let encryptRead = GattFlag(rawValue: "encrypt-read")
  public static let encryptWrite = GattFlag(rawValue: "encrypt-write")
  public static let encryptNotify = GattFlag(rawValue: "encrypt-notify")
  public static let encryptIndicate = GattFlag(rawValue: "encrypt-indicate")
  public static let encryptAuthenticatedRead = GattFlag(rawValue: "encrypt-authenticated-read")
  public static let encryptAuthenticatedWrite = GattFlag(rawValue: "encrypt-authenticated-write")
  public static let secureRead = GattFlag(rawValue: "secure-read")
  public static let secureWrite = GattFlag(rawValue: "secure-write")
  public static let authorize = GattFlag(rawValue: "authorize")
}
