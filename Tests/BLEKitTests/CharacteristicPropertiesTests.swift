import Testing

// A remote characteristic's BlueZ flags as BLEKit's properties.
@testable import BLEKit

@Suite struct CharacteristicPropertiesTests {
  @Test func remoteFlagsBecomeProperties() {
    let properties = CharacteristicProperties(
      remoteFlags: ["encrypt-read", "write-without-response", "notify", "unknown-flag"])
    #expect(properties == [.read, .writeWithoutResponse, .notify])
  }
}
