import BLEKit
import Bluetooth
import Testing

@Suite struct FolkBearsTempUserIDTests {
  static let id: [UInt8] = Array(1...16)
  /// What the lab saw for bluetoothctl's `advertise.manufacturer 0xffff 0x02 0x10 ...`.
  static let labValue: [UInt8] = [0x02, 0x10] + id

  @Test func decodesBlueZsValue() throws {
    let decoded = try FolkBearsTempUserID(data: Self.labValue)
    #expect(decoded.id == Self.id)
    #expect(decoded.hex == "0102030405060708090a0b0c0d0e0f10")
    #expect(decoded.description == decoded.hex)
  }

  @Test func decodesManufacturerDataAndRoundTrips() throws {
    let data = ManufacturerData(companyID: 0xFFFF, data: Self.labValue)
    let decoded = try FolkBearsTempUserID(data)
    #expect(decoded.manufacturerData == data)
    #expect(FolkBearsTempUserID(id: Self.id)?.manufacturerData == data)
    #expect(FolkBearsTempUserID(id: [1, 2]) == nil)
  }

  @Test func decodesTheRawCoreBluetoothForm() throws {
    let raw: [UInt8] = [0xFF, 0xFF] + Self.labValue
    #expect(raw.count == 20)
    let data = try ManufacturerData(adPayload: raw)
    #expect(try FolkBearsTempUserID(data).id == Self.id)
  }

  @Test(
    arguments: [
      ([], FolkBearsDecodingError.tooShort(count: 0)),
      ([0x02], .tooShort(count: 1)),
      ([0x02, 0x10, 0x01], .tooShort(count: 3)),
      ([0x02, 0x10] + Array(1...15), .tooShort(count: 17)),
      ([0x02, 0x10] + Array(1...17), .trailingBytes(count: 1)),  // 19 bytes
      ([0x03, 0x10] + Array(1...16), .wrongType(0x03)),
      ([0x05], .wrongType(0x05)),
      ([0x02, 0x11] + Array(1...16), .wrongLength(0x11)),
      ([0x02, 0x00], .wrongLength(0x00)),
    ] as [([UInt8], FolkBearsDecodingError)])
  func rejectsMalformedPayloads(bytes: [UInt8], expected: FolkBearsDecodingError) {
    #expect(throws: expected) { try FolkBearsTempUserID(data: bytes) }
  }

  @Test func rejectsOtherCompanies() {
    let data = ManufacturerData(companyID: 0x004C, data: Self.labValue)
    #expect(throws: FolkBearsDecodingError.wrongCompany(0x004C)) { try FolkBearsTempUserID(data) }
  }

  @Test(arguments: [1, 3, 19])
  func malformedRawPayloadsOfTheIssuesLengths(count: Int) {
    // 1, 3 and 19 bytes as they may come raw (company ID first): never a TempUserId.
    let raw = Array([0xFF, 0xFF, 0x02, 0x10] + Self.id).prefix(count)
    let result = Result { () throws(AdvertisingDecodingError) in
      try ManufacturerData(adPayload: raw)
    }
    switch result {
    case .failure(let error):
      #expect(error == .tooShort(field: "manufacturer data", count: count, needed: 2))
    case .success(let data):
      #expect(throws: FolkBearsDecodingError.self) { try FolkBearsTempUserID(data) }
    }
    // And as BlueZ's value (after the company ID).
    #expect(throws: FolkBearsDecodingError.self) {
      try FolkBearsTempUserID(data: Array(Self.labValue + [0, 0]).prefix(count))
    }
  }

  @Test func errorsAreOneLine() {
    #expect(
      FolkBearsDecodingError.tooShort(count: 3).description
        == "payload is 3 bytes, a TempUserId needs 18")
    #expect(
      FolkBearsDecodingError.wrongCompany(0x004C).description
        == "company 0x004C is not FolkBears' 0xFFFF")
    #expect(FolkBearsDecodingError.trailingBytes(count: 1).description.contains("1 unexpected"))
  }

  @Test func garbageNeverCrashes() {
    var random = SeededGenerator(seed: 4)
    var decoded = 0
    for round in 0..<20_000 {
      var bytes = random.bytes(Int.random(in: 0...40, using: &random))
      if round % 4 == 0, bytes.count >= 2 {
        bytes[0] = 0x02
        bytes[1] = 0x10
      }
      if let value = try? FolkBearsTempUserID(data: bytes) {
        decoded += 1
        #expect(value.manufacturerData.data == bytes)
      }
    }
    #expect(decoded > 0)
  }
}

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
      throws: AdvertisingDecodingError.tooShort(
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
    #expect(throws: AdvertisingDecodingError.unexpectedType(0xFF)) {
      try ServiceData(adType: 0xFF, payload: [1, 2])
    }
    #expect(throws: AdvertisingDecodingError.tooShort(field: "service data", count: 1, needed: 2)) {
      try ServiceData(adType: 0x16, payload: [1])
    }
    #expect(throws: AdvertisingDecodingError.tooShort(field: "service data", count: 15, needed: 16))
    {
      try ServiceData(adType: 0x21, payload: [UInt8](repeating: 0, count: 15))
    }
  }
}

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

@Suite struct HexBytesTests {
  @Test func formats() {
    #expect(HexBytes.format([0x02, 0x10, 0xAB]) == "0210ab")
    #expect(HexBytes.format([0x02, 0x10, 0xAB], separator: " ") == "02 10 ab")
    #expect(HexBytes.format([]) == "")
    #expect(HexBytes.companyID(0xFFFF) == "0xFFFF")
    #expect(HexBytes.companyID(0x4C) == "0x004C")
  }

  @Test(arguments: ["0210ab", "02 10 AB", "02:10:ab", "0x0210AB", "02-10-ab"])
  func parses(text: String) throws {
    #expect(try HexBytes.parse(text) == [0x02, 0x10, 0xAB])
  }

  @Test func parsesEmpty() throws {
    #expect(try HexBytes.parse("") == [])
  }

  @Test func aBarePrefixIsZeroBytes() throws {
    #expect(try HexBytes.parse("0x") == [])
  }

  @Test(arguments: ["0", "021", "0g", "0 2", "zz", "02,10", "0x0", " 0x02"])
  func rejects(text: String) {
    #expect(throws: HexBytes.ParseError(input: text)) { try HexBytes.parse(text) }
  }

  @Test func printableText() {
    #expect(HexBytes.printableText(Array("blekit 1.0".utf8)) == "blekit 1.0")
    #expect(HexBytes.printableText(Array("日本語\tok".utf8)) == "日本語\tok")
    #expect(HexBytes.printableText([]) == nil)
    #expect(HexBytes.printableText([0x64]) == "d")
    #expect(HexBytes.printableText([0x61, 0x00]) == nil)  // NUL padding
    #expect(HexBytes.printableText([0x0A]) == nil)
    #expect(HexBytes.printableText([0xFF, 0x61]) == nil)  // not UTF-8
    #expect(HexBytes.printableText([0xE2, 0x80, 0x8B]) == nil)  // zero-width space (format)
  }

  @Test func roundTripsRandomBytes() throws {
    var random = SeededGenerator(seed: 5)
    for _ in 0..<200 {
      let bytes = random.bytes(Int.random(in: 0...64, using: &random))
      #expect(try HexBytes.parse(HexBytes.format(bytes, separator: ":")) == bytes)
    }
  }
}
