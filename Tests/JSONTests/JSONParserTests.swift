// The parser: what it reads, and every refusal with its line, column and reason (input from a
// broker or a downloaded profile is anyone's).

import JSON
import Testing

@Suite struct JSONParserTests {
  func parse(_ text: String, depth: Int = 64) throws(JSONValue.SyntaxError) -> JSONValue {
    try JSONValue.parse(text, maximumDepth: depth)
  }

  func parse(bytes: [UInt8]) throws(JSONValue.SyntaxError) -> JSONValue {
    try JSONValue.parse(bytes, maximumDepth: 64)
  }

  /// The refusal of `text` as `line:column reason`.
  func refusal(_ text: String, depth: Int = 64) -> String? {
    refusal(bytes: Array(text.utf8), depth: depth)
  }

  func refusal(bytes: [UInt8], depth: Int = 64) -> String? {
    do {
      _ = try JSONValue.parse(bytes, maximumDepth: depth)
      return nil
    } catch {
      return "\(error.line):\(error.column) \(error.reason)"
    }
  }

  @Test func readsValuesInOrder() throws {
    let value = try parse(" {\"b\": [1, -2.5e1, true, false, null], \"a\": \"x\\/y\"} \n")
    #expect(
      value
        == .object([
          .init("b", .array([.int(1), .number(-25), .bool(true), .bool(false), .null])),
          .init("a", .string("x/y")),
        ]))
    #expect(value["a"]?.stringValue == "x/y")
    #expect(value["b"]?.doubleValue == nil)
    #expect(value["missing"] == nil)
  }

  @Test func numbers() throws {
    #expect(try parse("-0") == .int(0))
    #expect(try parse("9223372036854775807") == .int(.max))
    #expect(try parse("-9223372036854775808") == .int(.min))
    #expect(try parse("9223372036854775808") == .number(9_223_372_036_854_775_808))
    #expect(try parse("1.0") == .number(1))
    #expect(try parse("1E+2").intValue == 100)
    #expect(try parse("4.9e-324") == .number(4.9e-324))
    #expect(try parse("1e300") == .number(1e300))
    #expect(try parse("0.5").intValue == nil)
    for bad in ["+1", "01", "-01", "1.", ".5", "1e", "1e+", "-", "--1", "0x10", "NaN", "Infinity"] {
      #expect(refusal(bad) != nil, "\(bad)")
    }
    #expect(refusal("1e400") == "1:1 number out of range")
    #expect(refusal("[0, -1e400]") == "1:5 number out of range")
    #expect(refusal("01") == "1:2 unexpected text after the end")
    #expect(refusal("1.") == "1:3 expected a digit after '.'")
  }

  @Test func strings() throws {
    #expect(
      try parse(#""\ud83d\ude00 \u00e9\u001b \b\f\n\r\t""#) == .string("😀 é\u{1B} \u{8}\u{C}\n\r\t")
    )
    #expect(
      try parse("\"raw é 名 🐻 \u{7F}\u{9B}\u{202E}\"") == .string("raw é 名 🐻 \u{7F}\u{9B}\u{202E}"))
    // A string the writer wrote reads back the same, whatever it holds.
    let hostile = "\u{1B}]0;x\u{7}\u{9B}\u{202E}\u{2066}\u{200B}\u{2028}\u{E0041}😀\"\\\n"
    #expect(try parse(JSONValue.string(hostile).text) == .string(hostile))
  }

  @Test func refusesLoneSurrogates() {
    #expect(refusal(#"["\ud83d"]"#) == "1:3 lone surrogate")
    #expect(refusal(#""ab\ude00""#) == "1:4 lone surrogate")
    #expect(refusal(#""\ud83d\u0041""#) == "1:2 lone surrogate")
    #expect(refusal(#""\ud83d\ud83d""#) == "1:2 lone surrogate")
  }

  @Test func refusesTextThatIsNotUTF8() {
    let bad: [[UInt8]] = [
      [0xFF], [0xC0, 0x80], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80],
    ]
    for sequence in bad {
      let document = Array("{\"k\": \"a".utf8) + sequence + Array("b\"}".utf8)
      #expect(refusal(bytes: document) == "1:7 a string that is not UTF-8", "\(sequence)")
      let key = Array("{\"".utf8) + sequence + Array("\": 1}".utf8)
      #expect(refusal(bytes: key) == "1:2 a string that is not UTF-8", "\(sequence)")
    }
    // Outside strings any byte above ASCII is not JSON at all.
    #expect(refusal(bytes: [0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == "1:1 expected a value")
  }

  @Test func refusesDuplicateKeys() {
    #expect(refusal(#"{"a": 1, "a": 2}"#) == "1:10 key 'a' given twice")
    #expect(refusal(#"{"a": {"b": 1, "b": 1}}"#) == "1:16 key 'b' given twice")
    #expect((try? parse(#"[{"a": 1}, {"a": 2}]"#)) != nil)
  }

  @Test func refusesControlsAndBadEscapes() {
    #expect(refusal("\"a\u{1}b\"") == "1:3 control character in a string")
    #expect(refusal("\"a\nb\"") == "1:3 control character in a string")
    #expect(refusal(#""\q""#) == #"1:2 unknown escape '\q'"#)
    #expect(refusal(#""\u12g4""#) == #"1:6 expected 4 hex digits after \u"#)
    #expect(refusal("\"abc") == "1:5 unterminated string")
  }

  @Test func refusesWhatTheGrammarRefuses() {
    #expect(refusal("") == "1:1 unexpected end of text")
    #expect(refusal("  ") == "1:3 unexpected end of text")
    #expect(refusal("{\"a\":1,}") == "1:8 expected a key in quotes")
    #expect(refusal("[1 2]") == "1:4 expected ',' or ']'")
    #expect(refusal("{\"a\" 1}") == "1:6 expected ':' after the key")
    #expect(refusal("{\n  \"a\": tru}") == "2:8 expected a value")
    #expect(refusal("{} x") == "1:4 unexpected text after the end")
    #expect(refusal("'a'") == "1:1 expected a value")
    #expect(refusal("[1,]") == "1:4 expected a value")
  }

  /// A value more than `maximumDepth` levels deep is refused (the outermost is level 1).
  @Test func depthLimit() {
    func nested(_ depth: Int, _ inner: String = "") -> String {
      String(repeating: "[", count: depth) + inner + String(repeating: "]", count: depth)
    }
    #expect(refusal(nested(32), depth: 32) == nil)
    #expect(refusal(nested(31, "1"), depth: 32) == nil)
    #expect(refusal(nested(32, "1"), depth: 32) == "1:33 nested more than 32 deep")
    #expect(refusal(nested(33), depth: 32) == "1:33 nested more than 32 deep")
    #expect(refusal(nested(100_000), depth: 64) == "1:65 nested more than 64 deep")
  }
}
