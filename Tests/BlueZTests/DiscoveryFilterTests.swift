import BlueZ
import DBus
import Testing

// Adapter1.SetDiscoveryFilter's dictionary from a DiscoveryFilter.

@Suite struct DiscoveryFilterTests {
  @Test func discoveryFilterCarriesEveryField() throws {
    let filter = try #require(
      DiscoveryFilter(
        uuids: ["e20a39f4-73f5-4bc4-a12f-17d1ad07a961"], rssi: -50, transport: "le",
        duplicateData: true
      ).dbusValue.stringVariantDictionary)
    #expect(filter["Transport"] == .string("le"))
    #expect(filter["RSSI"] == .int16(-50))
    #expect(filter["DuplicateData"] == .bool(true))
    #expect(filter["UUIDs"]?.stringArrayValue == ["e20a39f4-73f5-4bc4-a12f-17d1ad07a961"])
    let empty = try #require(DiscoveryFilter().dbusValue.stringVariantDictionary)
    #expect(empty["UUIDs"] == nil && empty["RSSI"] == nil && empty["DuplicateData"] == nil)
  }
}
