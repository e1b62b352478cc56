// Reads structured values from a fuzzer's byte input, never failing: when the input runs out,
// reads return zeros and empty slices, so every input drives some path.

/// A cursor over the fuzzer's bytes.
struct FuzzInput {
  let bytes: [UInt8]
  var offset = 0

  init(_ start: UnsafePointer<UInt8>, _ count: Int) {
    bytes = Array(UnsafeBufferPointer(start: start, count: count))
  }

  init(bytes: [UInt8]) { self.bytes = bytes }

  /// Whether every byte was read.
  var isAtEnd: Bool { offset >= bytes.count }

  /// The next byte, or 0 at the end.
  mutating func byte() -> UInt8 {
    guard offset < bytes.count else { return 0 }
    defer { offset += 1 }
    return bytes[offset]
  }

  /// The next `count` bytes (fewer at the end).
  mutating func take(_ count: Int) -> [UInt8] {
    let end = min(bytes.count, offset + max(0, count))
    defer { offset = end }
    return Array(bytes[offset..<end])
  }

  /// A length-prefixed slice: one length byte, then that many bytes.
  mutating func chunk() -> [UInt8] { take(Int(byte())) }

  /// Everything not read yet.
  mutating func rest() -> [UInt8] { take(bytes.count - offset) }
}

/// Stops the fuzzer with a message: an invariant the code under test promised was broken.
func fuzzCheck(_ condition: Bool, _ message: @autoclosure () -> String) {
  if !condition { fatalError("fuzz invariant broken: \(message())") }
}
