// Test helpers: messages of known bytes (the seeded generator is in TestSupport).

@_exported import TestSupport

/// A message of `count` bytes of printable ASCII, different at every offset.
func asciiMessage(_ count: Int) -> String {
  let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789 ".utf8)
  return String(decoding: (0..<count).map { alphabet[$0 % alphabet.count] }, as: UTF8.self)
}
