import Bluetooth
import Testing

@Suite struct BluetoothUUIDTests {
  static let battery = "0000180f-0000-1000-8000-00805f9b34fb"

  @Test(arguments: [
    "180F", "180f", "0x180F", "0X180f", "0000180F", "0x0000180f", battery,
    "0000180F-0000-1000-8000-00805F9B34FB",
  ])
  func parsesBatteryInEveryForm(text: String) throws {
    let uuid = try BluetoothUUID(text)
    #expect(uuid.uuidString == Self.battery)
    #expect(uuid == BluetoothUUID(uint16: 0x180F))
    #expect(uuid.uint16Value == 0x180F)
    #expect(uuid.shortString == "180f")
  }

  @Test func parsesApplesTransferServiceInAnyCase() throws {
    let upper = try BluetoothUUID("E20A39F4-73F5-4BC4-A12F-17D1AD07A961")
    let lower = try BluetoothUUID("e20a39f4-73f5-4bc4-a12f-17d1ad07a961")
    #expect(upper == lower)
    #expect(upper.uuidString == "e20a39f4-73f5-4bc4-a12f-17d1ad07a961")
    #expect(upper.description == upper.uuidString)
    #expect(upper == BlekitUUID.transferService)
    #expect(upper.uint16Value == nil)
    #expect(upper.uint32Value == nil)
    #expect(!upper.isInBaseRange)
    #expect(upper.shortString == upper.uuidString)
    #expect(upper.advertisingSize == 16)
  }

  @Test(arguments: [
    "", "18", "180", "180F0", "0x", "0x18", "xyz!", "180G", "0x180G", " 180F", "180F ",
    "0x0000180f-0000-1000-8000-00805f9b34fb", "0000180f00001000800000805f9b34fb",
    "0000180f-0000-1000-8000-00805f9b34f", "0000180f-0000-1000-8000-00805f9b34fbb",
    "0000180f_0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fg",
    "+0000180f-000-1000-8000-00805f9b34fb", "１８０Ｆ",
  ])
  func rejectsMalformed(text: String) {
    #expect(throws: BluetoothUUID.ParseError(input: text)) { try BluetoothUUID(text) }
  }

  @Test func errorNamesTheInput() {
    do {
      _ = try BluetoothUUID("not-a-uuid")
      Issue.record("expected an error")
    } catch {
      #expect(error.description.contains("\"not-a-uuid\""))
      #expect(error.description.hasPrefix("invalid UUID"))
    }
  }

  @Test func thirtyTwoBitAlias() throws {
    let uuid = try BluetoothUUID("0x12345678")
    #expect(uuid.uuidString == "12345678-0000-1000-8000-00805f9b34fb")
    #expect(uuid.uint32Value == 0x1234_5678)
    #expect(uuid.uint16Value == nil)
    #expect(uuid.shortString == "12345678")
    #expect(uuid.advertisingSize == 4)
    #expect(uuid.advertisingBytes == [0x78, 0x56, 0x34, 0x12])
  }

  @Test func shortensOnlyInTheBaseRange() throws {
    let full = try BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fb")
    #expect(full.uint16Value == 0x180F)
    // Same alias bits, different base: not a SIG alias.
    let other = try BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fc")
    #expect(other.uint16Value == nil)
    #expect(other.advertisingSize == 16)
    let alsoOther = try BluetoothUUID("0000180f-0001-1000-8000-00805f9b34fb")
    #expect(alsoOther.uint32Value == nil)
  }

  @Test func advertisingBytesAreLittleEndian() throws {
    #expect(BluetoothUUID(uint16: 0x180F).advertisingBytes == [0x0F, 0x18])
    let transfer = BlekitUUID.transferService
    #expect(transfer.advertisingBytes.count == 16)
    #expect(transfer.advertisingBytes.first == 0x61)  // last byte of ...A961
    #expect(transfer.advertisingBytes.last == 0xE2)  // first byte of E20A...
  }

  @Test func advertisingBytesRoundTrip() throws {
    for uuid in [
      BluetoothUUID(uint16: 0x2A19), BluetoothUUID(uint32: 0xDEAD_BEEF),
      BlekitUUID.transferCharacteristic, BlekitUUID.sequencedTransferCharacteristic,
    ] {
      #expect(BluetoothUUID(advertisingBytes: uuid.advertisingBytes) == uuid)
    }
    #expect(BluetoothUUID(advertisingBytes: [0x01]) == nil)
    #expect(BluetoothUUID(advertisingBytes: [0x01, 0x02, 0x03]) == nil)
    #expect(BluetoothUUID(advertisingBytes: []) == nil)
  }

  @Test func bigEndianBytesRoundTrip() {
    let uuid = BlekitUUID.transferCharacteristic
    #expect(uuid.bigEndianBytes.count == 16)
    #expect(BluetoothUUID(bigEndianBytes: uuid.bigEndianBytes) == uuid)
    #expect(BluetoothUUID(bigEndianBytes: [UInt8](repeating: 0, count: 15)) == nil)
    #expect(uuid.uuidString == "08590f7e-db05-467e-8757-72f6faeb13d4")
  }

  @Test func blekitConstantsMatchTheirText() throws {
    #expect(
      try BluetoothUUID("08590F7E-DB05-467E-8757-72F6FAEB13D4")
        == BlekitUUID.transferCharacteristic)
    #expect(
      BlekitUUID.sequencedTransferCharacteristic.uuidString
        == "8eaae4b1-b2e1-4d09-b847-f21676e24277")
  }

  @Test func hashableAndComparable() throws {
    let set: Set = [
      try BluetoothUUID("180F"), try BluetoothUUID("0x180f"),
      BluetoothUUID(
        uint16: 0x180F),
    ]
    #expect(set.count == 1)
    #expect(BluetoothUUID(uint16: 0x1800) < BluetoothUUID(uint16: 0x1801))
    #expect(BluetoothUUID(uint16: 0x0000).uuidString == "00000000-0000-1000-8000-00805f9b34fb")
  }

  @Test func rawValueIsTheCanonicalForm() {
    #expect(BluetoothUUID(rawValue: "180F")?.rawValue == Self.battery)
    #expect(BluetoothUUID(rawValue: "nope") == nil)
  }

  @Test func randomTextNeverCrashesAndRoundTrips() throws {
    var parsed = 0
    var state: UInt64 = 77
    let alphabet = Array("0123456789abcdefABCDEFxX- g")
    for _ in 0..<20_000 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      let length = [4, 6, 8, 36, Int(state >> 58)][Int(state >> 33) % 5]
      let text = String(
        (0..<length).map { index in
          alphabet[Int((state >> UInt64(index % 50)) % UInt64(alphabet.count))]
        })
      if let uuid = try? BluetoothUUID(text) {
        parsed += 1
        #expect(try BluetoothUUID(uuid.uuidString) == uuid)
        #expect(try BluetoothUUID(uuid.shortString) == uuid)
      }
    }
    #expect(parsed > 0)
  }
}
