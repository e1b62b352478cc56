import BLEKit
import Bluetooth
import Testing

@Suite struct AdvertisingPayloadTests {
  static let tempUserIDData: [UInt8] = [0x02, 0x10] + Array(1...16)

  @Test func labExampleDoesNotFitAndSaysWhy() throws {
    // lab-notes: flags (3) + one 128-bit service UUID (18) + 22 bytes of manufacturer data.
    let payload = AdvertisingPayload(
      serviceUUIDs: [BlekitUUID.transferService],
      manufacturerData: [0xFFFF: Self.tempUserIDData])
    let size = payload.legacySize()
    #expect(!size.fits)
    #expect(size.advertisingDataLength == 43)
    #expect(
      size.description
        == "advertisement is 43 bytes, legacy limit is 31: flags 3, 128-bit service UUID 18, "
        + "manufacturer data 0xFFFF 22")
    #expect(throws: BluetoothError.advertisementTooLarge(size)) { try payload.validateLegacySize() }
  }

  @Test func twentyTwoBytesOfManufacturerDataAfterTheCompanyIDDoNotFitEither() {
    let payload = AdvertisingPayload(
      serviceUUIDs: [BlekitUUID.transferService],
      manufacturerData: [0xFFFF: [UInt8](repeating: 0xAB, count: 22)])
    #expect(payload.legacySize().advertisingDataLength == 47)
    #expect(!payload.legacySize().fits)
  }

  @Test func transferServiceAloneFits() throws {
    let payload = AdvertisingPayload(
      serviceUUIDs: [BlekitUUID.transferService], localName: "blekit")
    let size = try payload.validateLegacySize()
    #expect(size.advertisingDataLength == 21)
    // The local name goes to the scan response.
    #expect(size.scanResponse == [.init(name: "local name", length: 8)])
    #expect(!size.localNameTruncated)
  }

  @Test func manufacturerDataAloneFitsAsTheLabAdvertisedIt() throws {
    let payload = AdvertisingPayload(manufacturerData: [0xFFFF: Self.tempUserIDData])
    #expect(try payload.validateLegacySize().advertisingDataLength == 25)
  }

  @Test func exactlyThirtyOneFitsThirtyTwoDoesNot() {
    // flags 3 + manufacturer data (4 + n): n = 24 gives 31.
    var payload = AdvertisingPayload(manufacturerData: [0x004C: [UInt8](repeating: 0, count: 24)])
    #expect(payload.legacySize().advertisingDataLength == 31)
    #expect(payload.legacySize().fits)
    payload.manufacturerData[0x004C]!.append(0)
    #expect(!payload.legacySize().fits)
  }

  @Test func uuidsAreGroupedBySize() throws {
    let payload = AdvertisingPayload(
      kind: .broadcast,
      serviceUUIDs: [
        BluetoothUUID(uint16: 0x180F), BluetoothUUID(uint16: 0x180D),
        BluetoothUUID(uint32: 0x1234_5678), BluetoothUUID(uint16: 0x180F),
      ])
    let size = payload.legacySize()
    #expect(
      size.advertisingData == [
        .init(name: "16-bit service UUIDs", length: 6),
        .init(name: "32-bit service UUID", length: 6),
      ])
  }

  @Test func everyFieldKind() throws {
    let payload = AdvertisingPayload(
      kind: .peripheral,
      solicitUUIDs: [BluetoothUUID(uint16: 0x1812)],
      serviceData: [BluetoothUUID(uint16: 0x180F): [0x64]],
      appearance: 0x0340,
      includesTxPower: true)
    let size = payload.legacySize()
    #expect(
      size.breakdown
        == "flags 3, 16-bit solicited service UUID 4, service data 0x180F 5, appearance 4, tx power 3"
    )
    #expect(size.advertisingDataLength == 19)
  }

  @Test func serviceDataWith128BitUUID() {
    let payload = AdvertisingPayload(
      kind: .broadcast, serviceData: [BlekitUUID.transferService: [1, 2, 3]])
    #expect(
      payload.legacySize().advertisingData == [
        .init(name: "service data e20a39f4-73f5-4bc4-a12f-17d1ad07a961", length: 21)
      ])
  }

  @Test func flagsRule() {
    #expect(AdvertisingPayload(kind: .peripheral).includesFlags)
    #expect(!AdvertisingPayload(kind: .broadcast).includesFlags)
    #expect(AdvertisingPayload(kind: .broadcast, discoverable: true).includesFlags)
    #expect(!AdvertisingPayload(kind: .peripheral, flagsOverride: false).includesFlags)
    #expect(AdvertisingPayload(kind: .broadcast).legacySize().breakdown == "no fields")
  }

  @Test func longLocalNameIsTruncatedNotRejected() throws {
    let payload = AdvertisingPayload(localName: String(repeating: "n", count: 40))
    let size = try payload.validateLegacySize()
    #expect(size.localNameTruncated)
    #expect(size.scanResponseLength == 31)
  }

  @Test func multiByteLocalNameCountsBytes() {
    let size = AdvertisingPayload(localName: "日本").legacySize()
    #expect(size.scanResponseLength == 8)
  }

  @Test func manufacturerEntriesAreListedInCompanyOrder() {
    let payload = AdvertisingPayload(
      kind: .broadcast, manufacturerData: [0xFFFF: [1], 0x004C: [2, 3]])
    #expect(
      payload.legacySize().breakdown
        == "manufacturer data 0x004C 6, manufacturer data 0xFFFF 5")
  }
}
