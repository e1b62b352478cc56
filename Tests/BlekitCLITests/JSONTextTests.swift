// JSON text: string literals escape what JSON requires and parse back to the same string.
import Foundation
import Testing

@testable import blekit

@Suite struct JSONTextTests {
  @Test(arguments: [
    "", "bench", "say \"hi\"", "back\\slash", "line\nbreak\r\ttab", "bell\u{07}\u{1F}",
    "ünïcödé 名前 🐻", "del\u{7F}", "c1\u{80}\u{9B}31m\u{9F}", "latin1 \u{A0}\u{BF}¢",
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
    // DEL and the C1 controls (CSI is U+009B) are controls too; U+00A0 and up are not.
    #expect(JSON.quoted("\u{7F}\u{9B}2J\u{A0}") == "\"\\u007f\\u009b2J\u{A0}\"")
    #expect(JSON.quoted("a\"b\\c") == "\"a\\\"b\\\\c\"")
  }
}
