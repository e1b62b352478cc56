import BLEKit
import Bluetooth
import Testing

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

  /// Each rejected text with the byte where it goes wrong (its end for an odd digit).
  @Test(
    arguments: [
      ("0", 1), ("021", 3), ("0g", 1), ("0 2", 1), ("zz", 0), ("02,10", 2), ("0x0", 3),
      (" 0x02", 2), ("日本", 0),
    ] as [(String, Int)])
  func rejects(text: String, offset: Int) {
    let error = #expect(throws: BluetoothError.self) { try HexBytes.parse(text) }
    #expect(error?.code == .invalidHexBytes)
    #expect(error?.input == text)
    #expect(error?.offset == offset)
    #expect(error == .invalidHexBytes(text, offset: offset))
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
