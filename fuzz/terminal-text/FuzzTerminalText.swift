// libFuzzer target: TerminalText, the escaper between remote text and a terminal. Built by
// scripts/fuzz from Sources/blekit/Output/TerminalText.swift alone.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTerminalText(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: start, count: count))
  let text = String(decoding: bytes, as: UTF8.self)

  // One line: nothing a terminal acts on, no line break, and the escapes read back.
  let line = TerminalText.visible(text)
  for scalar in line.unicodeScalars {
    fuzzCheck(scalar == "\\" || !TerminalText.needsEscape(scalar), "raw U+\(hex(scalar)) kept")
  }
  fuzzCheck(unescape(line) == text, "the escapes do not read back")

  // A block: the same, newline and tab aside, ending with a newline; bytes that are not
  // UTF-8 as hex lines.
  let block = TerminalText.show(bytes)
  fuzzCheck(block.last == UInt8(ascii: "\n"), "a block does not end with a newline")
  guard let shown = String(validating: block, as: UTF8.self) else {
    fuzzCheck(false, "a block is not UTF-8")
    return 0
  }
  for scalar in shown.unicodeScalars where scalar != "\n" && scalar != "\t" {
    fuzzCheck(scalar == "\\" || !TerminalText.needsEscape(scalar), "raw U+\(hex(scalar)) shown")
  }
  if String(validating: bytes, as: UTF8.self) != nil {
    // By scalar: `hasSuffix` compares Characters, and "\r\n" is one Character.
    var expected = text
    if expected.unicodeScalars.last != "\n" { expected.unicodeScalars.append("\n") }
    fuzzCheck(unescape(shown) == expected, "a block's escapes do not read back")
  }
  return 0
}

func hex(_ scalar: Unicode.Scalar) -> String { String(scalar.value, radix: 16) }

/// Reads `\\`, `\xHH` and `\u{H...}` back; `nil` for anything else after a backslash.
func unescape(_ text: String) -> String? {
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
      guard scalars.count >= 2 else { return nil }
      let digits = String(String.UnicodeScalarView(scalars.prefix(2)))
      scalars = scalars.dropFirst(2)
      guard let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) else {
        return nil
      }
      out.append(scalar)
    case "u":
      guard scalars.popFirst() == "{", let end = scalars.firstIndex(of: "}") else { return nil }
      let digits = String(String.UnicodeScalarView(scalars[..<end]))
      scalars = scalars[(end + 1)...]
      guard let value = UInt32(digits, radix: 16), let scalar = Unicode.Scalar(value) else {
        return nil
      }
      out.append(scalar)
    default: return nil
    }
  }
  return String(out)
}
