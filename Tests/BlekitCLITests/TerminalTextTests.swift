// TerminalText: the one escaper between text from a peer or a broker and a terminal.

import Testing

@testable import blekit

@Suite struct TerminalTextTests {
  @Test func controlsNewlinesAndBackslashesAreVisibleOnOneLine() {
    #expect(TerminalText.visible("plain é 漢字 🔋") == "plain é 漢字 🔋")
    #expect(
      TerminalText.visible("a\u{1B}]0;t\u{07}\u{1B}[2J\u{7F}\u{9B}\u{85}b")
        == "a\\x1b]0;t\\x07\\x1b[2J\\x7f\\x9b\\x85b")
    #expect(TerminalText.visible("one\ntwo\r\tthree") == "one\\x0atwo\\x0d\\x09three")
    #expect(TerminalText.visible("C:\\x1b") == "C:\\\\x1b")
    #expect(TerminalText.visible("\u{0}") == "\\x00")
  }

  @Test func bidiAndFormatCharactersAreVisible() {
    // RLO, the isolates, marks, zero-width characters, BOM, a tag, the line and paragraph
    // separators, the Arabic letter mark, soft hyphen.
    let cases: [(String, String)] = [
      ("\u{202E}", "\\u{202e}"), ("\u{202A}", "\\u{202a}"), ("\u{2066}", "\\u{2066}"),
      ("\u{2067}", "\\u{2067}"), ("\u{2068}", "\\u{2068}"), ("\u{2069}", "\\u{2069}"),
      ("\u{200B}", "\\u{200b}"), ("\u{200C}", "\\u{200c}"), ("\u{200D}", "\\u{200d}"),
      ("\u{200E}", "\\u{200e}"), ("\u{200F}", "\\u{200f}"), ("\u{FEFF}", "\\u{feff}"),
      ("\u{E0041}", "\\u{e0041}"), ("\u{2028}", "\\u{2028}"), ("\u{2029}", "\\u{2029}"),
      ("\u{061C}", "\\u{61c}"), ("\u{00AD}", "\\xad"),
    ]
    for (raw, shown) in cases {
      #expect(TerminalText.visible("a\(raw)b") == "a\(shown)b", "\(raw.unicodeScalars.first!)")
    }
  }

  @Test func showKeepsLinesAndTabsOnly() {
    #expect(
      TerminalText.show(Array("l1\n\tl2\u{202E}\r\n".utf8))
        == Array("l1\n\tl2\\u{202e}\\x0d\n".utf8))
  }

  /// Reading the escapes back gives the original: nothing is ambiguous.
  @Test func escapesReadBack() {
    let samples = [
      "\\x1b", "a\\\u{1B}", "\\u{202e}\u{202E}", "\u{10FFFF}\u{E007F}\u{9F}\\\\", "",
    ]
    for sample in samples {
      #expect(Self.unescape(TerminalText.visible(sample)) == sample)
    }
  }

  static func unescape(_ text: String) -> String? {
    var out = String.UnicodeScalarView()
    var scalars = Array(text.unicodeScalars)[...]
    while let first = scalars.popFirst() {
      guard first == "\\" else {
        out.append(first)
        continue
      }
      switch scalars.popFirst() {
      case "\\": out.append("\\")
      case "x":
        let hex = String(String.UnicodeScalarView(scalars.prefix(2)))
        scalars = scalars.dropFirst(2)
        guard let value = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(value) else {
          return nil
        }
        out.append(scalar)
      case "u":
        guard scalars.popFirst() == "{", let end = scalars.firstIndex(of: "}") else { return nil }
        let hex = String(String.UnicodeScalarView(scalars[..<end]))
        scalars = scalars[(end + 1)...]
        guard let value = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(value) else {
          return nil
        }
        out.append(scalar)
      default: return nil
      }
    }
    return String(out)
  }
}
