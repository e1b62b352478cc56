// CRC32: the CRC-32 of IEEE 802.3 (as in zlib and PNG), used by the sequenced transfer framing
// to verify a reassembled message.

/// CRC-32 (IEEE 802.3): reflected polynomial 0xEDB88320, initial value 0xFFFFFFFF, final XOR
/// 0xFFFFFFFF. The check value of the ASCII bytes "123456789" is 0xCBF43926.
public struct CRC32: Hashable, Sendable {
  private static let table: [UInt32] = (0..<256).map { index in
    var crc = UInt32(index)
    for _ in 0..<8 {
      crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
    }
    return crc
  }

  private var state: UInt32 = 0xFFFF_FFFF

  /// Starts a checksum over no bytes.
  public init() {}

  /// Adds bytes to the checksum.
  public mutating func update(_ bytes: some Sequence<UInt8>) {
    var crc = state
    for byte in bytes {
      crc = Self.table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
    }
    state = crc
  }

  /// The checksum of the bytes added so far.
  public var value: UInt32 { state ^ 0xFFFF_FFFF }

  /// A checksum as errors show it: `0x` and eight lowercase hex digits (`0x0000beef`).
  public static func text(_ checksum: UInt32) -> String {
    let digits = String(checksum, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
  }

  /// The checksum of `bytes`.
  public static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc = CRC32()
    crc.update(bytes)
    return crc.value
  }
}
