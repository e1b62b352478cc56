// Characteristic properties and attribute permissions: CoreBluetooth's bit values, and the
// BlueZ flags they become.

import BlueZ
import Testing

@testable import BLEKit

@Suite struct CharacteristicPropertiesTests {
  @Test func bitValuesAreCoreBluetooths() {
    let expected: [(CharacteristicProperties, UInt16)] = [
      (.broadcast, 0x01), (.read, 0x02), (.writeWithoutResponse, 0x04), (.write, 0x08),
      (.notify, 0x10), (.indicate, 0x20), (.authenticatedSignedWrites, 0x40),
      (.extendedProperties, 0x80), (.notifyEncryptionRequired, 0x100),
      (.indicateEncryptionRequired, 0x200),
    ]
    for (property, value) in expected { #expect(property.rawValue == value) }
    let permissions: [(AttributePermissions, UInt8)] = [
      (.readable, 0x01), (.writeable, 0x02), (.readEncryptionRequired, 0x04),
      (.writeEncryptionRequired, 0x08),
    ]
    for (permission, value) in permissions { #expect(permission.rawValue == value) }
  }

  @Test func everyPropertyBecomesItsBlueZFlag() {
    let all: CharacteristicProperties = [
      .broadcast, .read, .writeWithoutResponse, .write, .notify, .indicate,
      .authenticatedSignedWrites, .extendedProperties, .notifyEncryptionRequired,
      .indicateEncryptionRequired,
    ]
    #expect(
      all.gattFlags(permissions: []).map(\.rawValue) == [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate",
        "authenticated-signed-writes", "extended-properties", "encrypt-notify",
        "encrypt-indicate",
      ])
  }

  @Test func encryptionPermissionsApplyOnlyToWhatTheyGuard() {
    let both: AttributePermissions = [.readEncryptionRequired, .writeEncryptionRequired]
    #expect(
      CharacteristicProperties([.read, .write]).gattFlags(permissions: both).map(\.rawValue)
        == ["read", "write", "encrypt-read", "encrypt-write"])
    // Without-response writes are guarded too; a notify-only characteristic has nothing to guard.
    #expect(
      CharacteristicProperties.writeWithoutResponse.gattFlags(permissions: both).map(\.rawValue)
        == ["write-without-response", "encrypt-write"])
    #expect(
      CharacteristicProperties.notify.gattFlags(permissions: both).map(\.rawValue) == ["notify"])
    // .readable and .writeable change nothing: BlueZ's flags come from the properties.
    #expect(
      CharacteristicProperties.read.gattFlags(permissions: [.readable, .writeable])
        == CharacteristicProperties.read.gattFlags(permissions: []))
  }
}
