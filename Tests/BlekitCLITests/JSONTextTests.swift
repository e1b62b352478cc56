// JSON text: string literals escape what JSON requires and parse back to the same string.
import Foundation
import Testing

@testable import blekit

@Suite struct JSONTextTests {
  @Test(arguments: [
    "", "bench", "say \"hi\"", "back\\slash", "line\nbreak\r\ttab", "bell\u{07}\u{1F}",
    "ünïcödé 名前 🐻", "del\u{7F}",
  ])
  func quotedStringsParseBack(text: String) throws {
    let literal = JSON.quoted(text)
    var bytes: [UInt8] = []
    JSON.appendQuoted(text, to: &bytes)
    #expect(Array(literal.utf8) == bytes)
    let parsed =
      try JSONSerialization.jsonObject(
        with: Data("[\(literal)]".utf8)) as? [String]
    #expect(parsed == [text])
    #expect(!literal.dropFirst().dropLast().contains { $0.asciiValue.map { $0 < 0x20 } ?? false })
  }

  @Test func controlCharactersUseLowercaseUnicodeEscapes() {
    #expect(JSON.quoted("\u{1B}[2J") == "\"\\u001b[2J\"")
    #expect(JSON.quoted("a\"b\\c") == "\"a\\\"b\\\\c\"")
  }
}
