// L2CAPMessageFraming: blekit's framing of one message over an L2CAP channel: a header SDU
// (magic, version, length, CRC-32), the bytes, and the receiver's acknowledgement.

/// The header SDU that opens a message: `"BLKL"`, the version, the length (UInt32) and the
/// CRC-32 (IEEE, as ``CRC32``) of the message, little-endian; 13 bytes, well under the
/// smallest LE channel MTU (23).
///
/// Version 2 (what blekit sends) adds flow control: the sender keeps at most
/// ``L2CAPMessageWindow/size`` bytes (plus one SDU) unconfirmed, and the receiver confirms
/// what it has taken in ``L2CAPMessageWindow`` SDUs. Version 1 (no window) is still received.
public struct L2CAPMessageHeader: Hashable, Sendable {
  public static let magic: [UInt8] = Array("BLKL".utf8)
  /// The version this side sends.
  public static let version: UInt8 = 2
  /// The versions this side receives.
  public static let versions: ClosedRange<UInt8> = 1...2
  public static let size = 13

  public var length: Int
  public var checksum: UInt32
  /// The framing version (2: the sender waits for window confirmations).
  public var version: UInt8

  public init(length: Int, checksum: UInt32, version: UInt8 = L2CAPMessageHeader.version) {
    self.length = length
    self.checksum = checksum
    self.version = version
  }

  /// The header of `message`.
  public init(for message: [UInt8]) {
    self.init(length: message.count, checksum: CRC32.checksum(message))
  }

  public var bytes: [UInt8] {
    Self.magic + [version] + littleEndian(UInt32(length)) + littleEndian(checksum)
  }

  /// Whether the sender waits for ``L2CAPMessageWindow`` confirmations.
  public var isWindowed: Bool { version >= 2 }

  /// Parses a header SDU.
  public init(bytes: [UInt8]) throws(BluetoothError) {
    guard bytes.count == Self.size, Array(bytes[0..<4]) == Self.magic else {
      throw .notAMessage("the first SDU (\(bytes.count) bytes) is not a message header")
    }
    guard Self.versions.contains(bytes[4]) else {
      throw .notAMessage(
        "framing version \(bytes[4]); this receiver knows \(Self.versions.lowerBound) to "
          + "\(Self.versions.upperBound)")
    }
    self.init(
      length: Int(readLittleEndian(bytes, at: 5)), checksum: readLittleEndian(bytes, at: 9),
      version: bytes[4])
  }
}

/// The receiver's confirmation of the bytes it has taken so far (version 2): `"WIN"` and the
/// count (UInt32, little-endian). The sender sends on while fewer than ``size`` bytes are
/// unconfirmed.
///
/// Why a window on top of L2CAP's own credits: Linux 6.1's LE receive path (Debian 12) grants
/// credits on an estimate of the socket's free memory that undercounts each frame, so a peer
/// can send more than fits; the kernel then parks SDUs and can queue a later one ahead of
/// them (docs/l2cap.md). With at most 24 KiB (plus one SDU) in flight, the receiving socket's
/// queue (about 208 KiB) cannot fill, whatever the link's speed or the receiver's pauses.
public struct L2CAPMessageWindow: Hashable, Sendable {
  public static let magic: [UInt8] = Array("WIN".utf8)
  /// The most bytes the sender leaves unconfirmed (it may start one more SDU below it).
  public static let size = 24 * 1024
  /// The receiver confirms each time this many more bytes arrived (and at the end).
  public static let step = 8 * 1024

  /// Bytes the receiver has taken.
  public var received: Int

  public init(received: Int) { self.received = received }

  public var bytes: [UInt8] { Self.magic + littleEndian(UInt32(received)) }

  public init?(bytes: [UInt8]) {
    guard bytes.count == 7, Array(bytes[0..<3]) == Self.magic else { return nil }
    received = Int(readLittleEndian(bytes, at: 3))
  }
}

/// The receiver's answer once a message passed its checks: `"ACK"` and the CRC-32 it
/// computed, so the sender knows the very bytes it sent arrived.
public struct L2CAPMessageAcknowledgement: Hashable, Sendable {
  public static let magic: [UInt8] = Array("ACK".utf8)
  public var checksum: UInt32

  public init(checksum: UInt32) { self.checksum = checksum }

  public var bytes: [UInt8] { Self.magic + littleEndian(checksum) }

  public init?(bytes: [UInt8]) {
    guard bytes.count == 7, Array(bytes[0..<3]) == Self.magic else { return nil }
    checksum = readLittleEndian(bytes, at: 3)
  }
}

/// Collects one message from its header and the SDUs that follow, then checks it.
public struct L2CAPMessageAssembler: Sendable {
  public let header: L2CAPMessageHeader
  public private(set) var bytes: [UInt8] = []
  private var crc = CRC32()

  /// Starts from the header SDU; `limit` is the longest message accepted.
  public init(headerSDU: [UInt8], limit: Int) throws(BluetoothError) {
    header = try L2CAPMessageHeader(bytes: headerSDU)
    guard header.length <= limit else {
      throw .tooLarge(length: header.length, limit: limit)
    }
    // The header is the peer's word: memory is taken as bytes arrive (an array doubles as it
    // grows), never reserved up front for the length it announces.
  }

  /// Bytes received so far.
  public var received: Int { bytes.count }
  /// SDUs received so far after the header.
  public private(set) var sdus = 0
  public var isComplete: Bool { bytes.count >= header.length }

  /// Adds one SDU's bytes.
  public mutating func append(_ sdu: [UInt8]) throws(BluetoothError) {
    guard bytes.count + sdu.count <= header.length else {
      throw .trailingBytes(expected: header.length, received: bytes.count + sdu.count)
    }
    bytes += sdu
    sdus += 1
    crc.update(sdu)
  }

  /// The message, once it has its announced length and its CRC-32 matches.
  public func verified() throws(BluetoothError) -> [UInt8] {
    guard bytes.count == header.length else {
      throw .cut(received: bytes.count, sdus: sdus, expected: header.length)
    }
    guard crc.value == header.checksum else {
      throw .checksumMismatch(expected: header.checksum, actual: crc.value)
    }
    return bytes
  }
}

private func littleEndian(_ value: UInt32) -> [UInt8] {
  [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24)]
}

private func readLittleEndian(_ bytes: [UInt8], at offset: Int) -> UInt32 {
  UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
    | UInt32(bytes[offset + 3]) << 24
}
