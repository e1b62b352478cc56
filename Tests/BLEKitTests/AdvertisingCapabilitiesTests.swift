// The size check's limit: the adapter's MaxAdvLen when bluetoothd reports it, 31 otherwise;
// and what LEAdvertisingManager1's properties say about extended advertising.

import Bluetooth
import DBus
import Testing

@testable import BLEKit
@testable import BlueZ

@Suite struct AdvertisingCapabilitiesTests {
  /// LEAdvertisingManager1's properties as bluetoothd 5.66 gives them without --experimental.
  static let plain: [String: DBusValue] = [
    "ActiveInstances": .byte(0), "SupportedInstances": .byte(5),
    "SupportedIncludes": .array(element: "s", [.string("tx-power"), .string("local-name")]),
  ]

  /// ... and with --experimental on a controller with extended advertising.
  static let extended: [String: DBusValue] = plain.merging([
    "SupportedSecondaryChannels": .array(element: "s", [.string("1M"), .string("2M")]),
    "SupportedFeatures": .array(element: "s", [.string("CanSetTxPower")]),
    "SupportedCapabilities": .dictionary(
      key: "s", value: "v",
      [
        DBusDictEntry(key: .string("MaxAdvLen"), value: .variant(.byte(251))),
        DBusDictEntry(key: .string("MaxScnRspLen"), value: .variant(.byte(251))),
        DBusDictEntry(key: .string("MinTxPower"), value: .variant(.int16(-34))),
        DBusDictEntry(key: .string("MaxTxPower"), value: .variant(.int16(10))),
      ]),
  ]) { $1 }

  static func capabilities(_ all: [String: DBusValue]) throws -> AdvertisingCapabilities {
    AdvertisingCapabilities(try #require(LEAdvertisingManager1.Properties(all)))
  }

  /// Flags (3) + a 128-bit service UUID (18) + 22 bytes of manufacturer data (4 + 22): 47.
  static let tooLargeForLegacy = AdvertisingPayload(
    serviceUUIDs: [BlekitUUID.transferService],
    manufacturerData: [0xFFFF: [0x02, 0x10] + Array(1...20)])

  @Test func withoutMaxAdvLenTheLimitIsTheLegacy31() throws {
    let capabilities = try Self.capabilities(Self.plain)
    #expect(capabilities.maxAdvertisingDataLength == nil)
    #expect(capabilities.advertisingDataLimit == 31)
    #expect(capabilities.secondaryChannels.isEmpty)
    #expect(capabilities.txPowerRange == nil)
    let error = #expect(throws: BluetoothError.self) {
      try Self.tooLargeForLegacy.validateLegacySize(limit: capabilities.advertisingDataLimit)
    }
    #expect(
      error?.description
        == "advertisement is 47 bytes, legacy limit is 31: flags 3, 128-bit service UUID 18, "
        + "manufacturer data 0xFFFF 26")
    // The sizes stay typed: no caller needs the line's text.
    #expect(error?.code == .advertisementTooLarge)
    #expect(error?.size == 47)
    #expect(error?.limit == 31)
    #expect(error?.advertisingPayloadSize?.advertisingData.map(\.length) == [3, 18, 26])
  }

  @Test func maxAdvLenRaisesTheLimitAndTheBreakdownNamesIt() throws {
    let capabilities = try Self.capabilities(Self.extended)
    #expect(capabilities.maxAdvertisingDataLength == 251)
    #expect(capabilities.advertisingDataLimit == 251)
    #expect(capabilities.secondaryChannels == [.oneM, .twoM])
    #expect(capabilities.features == ["CanSetTxPower"])
    #expect(capabilities.txPowerRange == -34...10)
    #expect(capabilities.maxScanResponseLength == 251)
    let size = try Self.tooLargeForLegacy.validateLegacySize(limit: 251)
    #expect(size.advertisingDataLength == 47)
    let huge = AdvertisingPayload(manufacturerData: [0xFFFF: Array(repeating: 7, count: 250)])
    let error = #expect(throws: BluetoothError.self) {
      try huge.validateLegacySize(limit: 251)
    }
    #expect(
      error?.description
        == "advertisement is 257 bytes, the adapter's limit (MaxAdvLen) is 251: flags 3, "
        + "manufacturer data 0xFFFF 254")
  }

  @Test func aFieldLongerThan31BytesDoesNotFitEvenWithMaxAdvLen() throws {
    // 40 bytes of manufacturer data: a 44-byte field, which bluetoothd 5.66 refuses.
    let one = AdvertisingPayload(manufacturerData: [0xFFFF: Array(repeating: 0, count: 40)])
    let error = #expect(throws: BluetoothError.self) {
      try one.validateLegacySize(limit: 251)
    }
    #expect(
      error?.description
        == "advertisement is 47 bytes, the adapter's limit (MaxAdvLen) is 251, but manufacturer "
        + "data 0xFFFF takes 44 and bluetoothd builds at most 31 per field: flags 3, "
        + "manufacturer data 0xFFFF 44")
    // The same bytes in two fields fit.
    let two = AdvertisingPayload(manufacturerData: [
      0xFFFF: Array(repeating: 0, count: 24), 0x1234: Array(repeating: 1, count: 20),
    ])
    #expect(try two.validateLegacySize(limit: 251).advertisingDataLength == 55)
    #expect(throws: BluetoothError.self) { try two.validateLegacySize() }
  }

  @Test func withoutInstanceCountsThereAreNoCapabilities() {
    #expect(
      LEAdvertisingManager1.Properties(["SupportedIncludes": .array(element: "s", [])]) == nil)
  }

  @Test func unknownSecondaryChannelNamesAreLeftOut() throws {
    var all = Self.plain
    all["SupportedSecondaryChannels"] = .array(element: "s", [.string("Coded"), .string("4M")])
    #expect(try Self.capabilities(all).secondaryChannels == [.coded])
  }

  @Test func theAdvertisementCarriesSecondaryChannelAndIntervalsInMilliseconds() {
    let payload = AdvertisingPayload(
      secondaryChannel: .coded, minInterval: .milliseconds(100), maxInterval: .seconds(1.5))
    let advertisement = PeripheralManager.advertisement(payload, txPower: -4)
    #expect(advertisement.secondaryChannel == "Coded")
    #expect(advertisement.minInterval == 100)
    #expect(advertisement.maxInterval == 1500)
    #expect(advertisement.txPower == -4)
    let names = advertisement.propertyTable.map(\.name)
    #expect(names.contains("SecondaryChannel") && names.contains("MinInterval"))
    #expect(
      advertisement.propertyTable.first { $0.name == "MaxInterval" }?.value == .uint32(1500))
  }

  /// LEAdvertisingManager1 as bluetoothd 5.82 exposes it without --experimental on a legacy
  /// (LE-only btvirt) controller: SupportedFeatures present, but empty.
  static let trixieLegacy: [String: DBusValue] = plain.merging([
    "SupportedFeatures": .array(element: "s", []),
    "SupportedCapabilities": .dictionary(
      key: "s", value: "v",
      [DBusDictEntry(key: .string("MaxAdvLen"), value: .variant(.byte(31)))]),
  ]) { $1 }

  @Test func withoutSupportedFeaturesBluetoothdIgnoresTxPowerAndIntervals() throws {
    // 5.66 without --experimental: the property and the reading of the options are gated alike.
    let capabilities = try Self.capabilities(Self.plain)
    #expect(!capabilities.honoursParameterRequests)
    let ignored = capabilities.ignoredRequests(
      txPower: -6, minInterval: .milliseconds(200), maxInterval: .milliseconds(250))
    #expect(ignored.count == 1)
    #expect(ignored.first?.contains("TxPower, MinInterval, MaxInterval") == true)
    #expect(ignored.first?.contains("--experimental") == true)
    #expect(
      capabilities.ignoredRequests(txPower: nil, minInterval: nil, maxInterval: nil).isEmpty)
  }

  @Test func withSupportedFeaturesNothingIsIgnoredThatTheAdapterCanDo() throws {
    // 5.66 with --experimental, or 5.82, on a controller with extended advertising.
    let extended = try Self.capabilities(Self.extended)
    #expect(extended.honoursParameterRequests)
    #expect(
      extended.ignoredRequests(
        txPower: -6, minInterval: .milliseconds(200), maxInterval: .milliseconds(250)
      ).isEmpty)
    // 5.82 on a legacy controller: intervals are read, the TX power cannot be set.
    let legacy = try Self.capabilities(Self.trixieLegacy)
    #expect(legacy.honoursParameterRequests)
    #expect(
      legacy.ignoredRequests(
        txPower: nil, minInterval: .milliseconds(200), maxInterval: .milliseconds(250)
      ).isEmpty)
    let power = legacy.ignoredRequests(txPower: -6, minInterval: nil, maxInterval: nil)
    #expect(power.count == 1 && power.first?.contains("CanSetTxPower") == true)
    #expect(!(power.first?.contains("--experimental") ?? true))
  }

  @Test func oneIntervalEndAloneIsIgnored() throws {
    let extended = try Self.capabilities(Self.extended)
    let ignored = extended.ignoredRequests(
      txPower: nil, minInterval: .milliseconds(200), maxInterval: nil)
    #expect(
      ignored.count == 1 && ignored.first?.contains("both MinInterval and MaxInterval") == true)
  }
}
