// The writer's bytes, pinned: what the CLI prints, what gateways publish and what clone writes
// all come from here, and the lab suites compare them.

import JSON
import Testing

@Suite struct JSONWriterTests {
  @Test func controlCharactersAreEscapedLowercase() {
    // \n, \r and \t by name; every other C0 control, DEL and the C1 controls as \u00XX.
    #expect(JSONValue.quoted("a\nb\rc\td") == #""a\nb\rc\td""#)
    #expect(
      JSONValue.quoted("\u{0}\u{7}\u{8}\u{C}\u{1B}[2J\u{1F}")
        == #""\u0000\u0007\u0008\u000c\u001b[2J\u001f""#)
    #expect(JSONValue.quoted("\u{7F}\u{80}\u{9B}31m\u{9F}") == #""\u007f\u0080\u009b31m\u009f""#)
    #expect(JSONValue.quoted("a\"b\\c/d") == #""a\"b\\c/d""#)
  }

  @Test func formatCharactersAndSeparatorsAreEscaped() {
    // Bidi override and isolate, zero-width space and joiner, BOM, soft hyphen, the line and
    // paragraph separators; a tag (beyond the BMP) as a surrogate pair.
    #expect(
      JSONValue.quoted("\u{202E}\u{2066}\u{200B}\u{200D}\u{FEFF}\u{AD}\u{2028}\u{2029}")
        == #""\u202e\u2066\u200b\u200d\ufeff\u00ad\u2028\u2029""#)
    #expect(JSONValue.quoted("\u{E0041}") == #""\udb40\udc41""#)
  }

  @Test func otherNonASCIIIsCopiedAsUTF8() {
    let text = "\u{A0}¢ ünïcödé 名前 🐻 \u{1F600}"
    #expect(Array(JSONValue.quoted(text).utf8) == Array("\"\(text)\"".utf8))
  }

  @Test func quotedAndAppendQuotedAgree() {
    for text in ["", "plain", "\u{1B}\u{202E}é🐻", "\"\\"] {
      var bytes: [UInt8] = [0x41]
      JSONValue.appendQuoted(text, to: &bytes)
      #expect(bytes == [0x41] + Array(JSONValue.quoted(text).utf8))
      #expect(JSONValue.string(text).text == JSONValue.quoted(text))
    }
  }

  @Test func integersAndDoubles() {
    #expect(JSONValue.int(12).text == "12")
    #expect(JSONValue.int(-7).text == "-7")
    #expect(JSONValue.int(.max).text == "9223372036854775807")
    #expect(JSONValue.int(.min).text == "-9223372036854775808")
    // Doubles: to 3 decimals, a whole one without ".0".
    #expect(JSONValue.number(12).text == "12")
    #expect(JSONValue.number(12.5).text == "12.5")
    #expect(JSONValue.number(1_796_220_000.1256).text == "1796220000.126")
    #expect(JSONValue.number(0.1).text == "0.1")
    #expect(JSONValue.number(-0.0004).text == "0")
    #expect(JSONValue.number(-61.25).text == "-61.25")
    // From 1e15 on as Swift writes the Double; not finite: null.
    #expect(JSONValue.number(999_999_999_999_999).text == "999999999999999")
    #expect(JSONValue.number(1e15).text == "1000000000000000.0")
    #expect(JSONValue.number(1e16).text == "1e+16")
    #expect(JSONValue.number(1e300).text == "1e+300")
    #expect(JSONValue.number(.infinity).text == "null")
    #expect(JSONValue.number(-.infinity).text == "null")
    #expect(JSONValue.number(.nan).text == "null")
  }

  @Test func compactLayoutKeepsKeyOrder() {
    let value = JSONValue.object([
      .init("z", .int(1)), .init("a", .array([.bool(true), .null, .string("x")])),
      .init("m", .object([])),
    ])
    #expect(value.text == #"{"z":1,"a":[true,null,"x"],"m":{}}"#)
    #expect(JSONValue.array([]).text == "[]")
    #expect(JSONValue.object([.init("k\n", .string("v"))]).text == #"{"k\n":"v"}"#)
  }

  /// Clone's layout: containers holding containers, and long arrays, a line per member.
  @Test func indentedLayout() {
    let value = JSONValue.object([
      .init(
        "services",
        .array([.object([.init("uuid", .string("180d")), .init("primary", .bool(true))])])),
      .init("empty", .array([])),
      .init("flags", .array([.string("read"), .string("notify")])),
      .init("long", .array((0..<30).map { .int($0) })),
    ])
    let expected = """
      {
        "services": [
          {"uuid":"180d","primary":true}
        ],
        "empty": [],
        "flags": ["read","notify"],
        "long": [
          \((0..<30).map(String.init).joined(separator: ",\n    "))
        ]
      }
      """
    #expect(value.indentedText() == expected)
    #expect(JSONValue.string("\u{1B}").indentedText() == #""\u001b""#)
  }
}
