import BLEKit
import Bluetooth
import Testing

@Suite struct ManufacturerAndServiceDataTests {
  @Test func manufacturerDataForms() throws {
    let data = try ManufacturerData(adPayload: [0x4C, 0x00, 0x02, 0x15])
    #expect(data.companyID == 0x004C)
    #expect(data.data == [0x02, 0x15])
    #expect(data.adPayload == [0x4C, 0x00, 0x02, 0x15])
    #expect(data.companyName == "Apple, Inc.")
    #expect(data.description == "0x004C (Apple, Inc.): 02 15")
    #expect(try ManufacturerData(adPayload: [0x34, 0x12]).data == [])
    #expect(ManufacturerData(companyID: 0x1234, data: []).description == "0x1234: ")
  }

  @Test(arguments: [[], [0x4C]] as [[UInt8]])
  func manufacturerDataTooShort(bytes: [UInt8]) {
    #expect(
      throws: BluetoothError.tooShort(
        field: "manufacturer data", count: bytes.count, needed: 2)
    ) {
      try ManufacturerData(adPayload: bytes)
    }
  }

  @Test func serviceDataFromEveryUUIDSize() throws {
    let battery = try ServiceData(adType: 0x16, payload: [0x0F, 0x18, 0x64])
    #expect(battery.uuid == BluetoothUUID(uint16: 0x180F))
    #expect(battery.data == [0x64])
    #expect(battery.description == "0x180F (Battery): 64")
    #expect(battery.adType == 0x16)
    #expect(battery.adPayload == [0x0F, 0x18, 0x64])

    let thirtyTwo = try ServiceData(adType: 0x20, payload: [0x78, 0x56, 0x34, 0x12])
    #expect(thirtyTwo.uuid == BluetoothUUID(uint32: 0x1234_5678))
    #expect(thirtyTwo.data.isEmpty)
    #expect(thirtyTwo.adType == 0x20)

    let transfer = BlekitUUID.transferService
    let full = try ServiceData(adType: 0x21, payload: transfer.advertisingBytes + [9])
    #expect(full.uuid == transfer)
    #expect(full.data == [9])
    #expect(full.adType == 0x21)
  }

  @Test func serviceDataFromBlueZKeys() throws {
    let data = try ServiceData(key: "0000180f-0000-1000-8000-00805f9b34fb", data: [0x64])
    #expect(data.uuid.uint16Value == 0x180F)
    #expect(throws: BluetoothUUID.ParseError.self) { try ServiceData(key: "bogus", data: []) }
  }

  @Test func serviceDataErrors() {
    #expect(throws: BluetoothError.unexpectedType(0xFF)) {
      try ServiceData(adType: 0xFF, payload: [1, 2])
    }
    #expect(throws: BluetoothError.tooShort(field: "service data", count: 1, needed: 2)) {
      try ServiceData(adType: 0x16, payload: [1])
    }
    #expect(throws: BluetoothError.tooShort(field: "service data", count: 15, needed: 16)) {
      try ServiceData(adType: 0x21, payload: [UInt8](repeating: 0, count: 15))
    }
  }
}
