import BLEKit
import Bluetooth
import Testing

@Suite struct ADStructureTests {
  @Test func parsesARealAdvertisement() throws {
    let raw: [UInt8] =
      ADStructure(type: 0x01, data: [0x06]).bytes
      + ADStructure(type: 0x07, data: BlekitUUID.transferService.advertisingBytes).bytes
      + ADStructure(type: 0xFF, data: [0xFF, 0xFF, 0x02, 0x10]).bytes
    #expect(raw.count == 3 + 18 + 6)
    let result = ADStructure.parse(raw + [0, 0, 0, 0])  // zero padding
    #expect(result.error == nil)
    #expect(result.structures.map(\.type) == [0x01, 0x07, 0xFF])
    #expect(
      BluetoothUUID(advertisingBytes: result.structures[1].data)
        == BlekitUUID.transferService)
    #expect(try ManufacturerData(adPayload: result.structures[2].data).companyID == 0xFFFF)
  }

  @Test func truncatedStructureKeepsWhatCameBefore() {
    let raw: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0xFF, 0x4C]
    let result = ADStructure.parse(raw)
    #expect(result.structures == [ADStructure(type: 0x01, data: [0x06])])
    #expect(result.error == .truncatedStructure(offset: 3, declaredLength: 5, available: 2))
  }

  @Test func emptyAndTinyInputs() {
    #expect(ADStructure.parse([]).structures.isEmpty)
    #expect(ADStructure.parse([0x00]).error == nil)
    #expect(
      ADStructure.parse([0x01]).error
        == .truncatedStructure(offset: 0, declaredLength: 1, available: 0))
    #expect(ADStructure.parse([0x01, 0x09]).structures == [ADStructure(type: 0x09, data: [])])
  }

  @Test func garbageNeverCrashes() {
    var random = SeededGenerator(seed: 31)
    for _ in 0..<20_000 {
      let bytes = random.bytes(Int.random(in: 0...62, using: &random))
      let result = ADStructure.parse(bytes)
      let consumed = result.structures.reduce(0) { $0 + $1.bytes.count }
      #expect(consumed <= bytes.count)
      if result.error == nil, consumed < bytes.count { #expect(bytes[consumed] == 0) }
    }
  }
}
