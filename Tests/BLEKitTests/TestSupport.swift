// Test helpers: a seeded random generator so shuffles and garbage are reproducible.

/// SplitMix64: a small, seeded pseudo-random generator (deterministic across runs).
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  mutating func bytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
  }
}

/// A message of `count` bytes of printable ASCII, different at every offset.
func asciiMessage(_ count: Int) -> String {
  let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789 ".utf8)
  return String(decoding: (0..<count).map { alphabet[$0 % alphabet.count] }, as: UTF8.self)
}
