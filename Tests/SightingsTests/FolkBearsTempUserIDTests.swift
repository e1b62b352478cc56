import BLEKit
import Sightings
import TestSupport
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
    let result = Result { () throws(BluetoothError) in
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
