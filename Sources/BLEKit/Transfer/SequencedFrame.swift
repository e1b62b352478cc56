// SequencedFrame: one frame of blekit's sequenced transfer framing, and the wire format.
//
// WHY. The sample's plain protocol (chunks, then "EOM") has no sequence numbers. BlueZ 5.66
// enables EATT (`[GATT] Channels = 3`) and then sends notifications on several ATT bearers,
// which can deliver them out of order. A plain receiver
// cannot tell (any permutation is valid bytes). Between two blekit ends, the message travels
// instead on blekit's sequenced characteristic (`BlekitUUID.sequencedTransferCharacteristic`,
// in the same service as the plain one). A blekit central subscribes to it when the
// peripheral offers it, and to the plain characteristic otherwise; other peers never see it.
//
// WIRE FORMAT, version 1. Every notification value is one frame; all integers little-endian.
//
//   offset size field
//   0      1    control: bits 0-3 framing version (1); bit 7 END; bits 4-6 reserved (0)
//   1      1    message number, modulo 256; the sender counts the messages it sends on one
//               subscription (0, 1, 2, ...) so frames of consecutive messages never mix
//   2      2    sequence number (UInt16)
//   4      ...  body
//
//   Data frame (END clear): body = 1 to L - 4 bytes of the message, where
//     L = min(ATT MTU - 3, 512) is the largest notification value. The data frames of a
//     message carry consecutive slices of it and are numbered 0, 1, 2, ... modulo 65536.
//     Every data frame but one (the message's last) carries at least 16 bytes, L - 4 at LE's
//     minimum ATT MTU of 23: a receiver refuses a second shorter one, which bounds the frames
//     it holds per message to its length limit / 16.
//   End frame (END set): sequence number = the data frame count modulo 65536, body = 12 bytes:
//     offset 4  UInt32 data frame count
//     offset 8  UInt32 message length in bytes
//     offset 12 UInt32 CRC-32 (IEEE 802.3, as zlib) of the whole message
//   An empty message is a lone end frame (count 0, length 0, CRC 0).
//
// The sender sends the data frames in order, then the end frame. The receiver places each
// data frame by its number, whatever order frames arrive in, ignores duplicates, and delivers
// the message once the end frame and every data frame are there, the length matches and the
// CRC-32 matches. Sequence numbers wrap at 65536 (more than 33 MB at L = 512): the receiver
// unwraps each 16-bit number to the frame index nearest the highest one seen so far, which is
// exact as long as no frame arrives 32768 or more frames away from its place. Reordering
// across ATT bearers is a few frames.

/// One frame of the sequenced transfer framing (see the wire format above).
public enum SequencedFrame: Hashable, Sendable {
  /// A slice of the message.
  case data(message: UInt8, sequence: UInt16, payload: [UInt8])
  /// The end of a message: frame count, length and CRC-32.
  case end(message: UInt8, frameCount: UInt32, length: UInt32, crc: UInt32)

  /// The framing version this code writes and reads.
  public static let version: UInt8 = 1
  /// Bytes of the header before the body.
  public static let headerLength = 4
  /// Bytes of an end frame.
  public static let endFrameLength = headerLength + 12
  /// The END bit of the control byte.
  static let endFlag: UInt8 = 0x80

  /// The message number the frame belongs to.
  public var message: UInt8 {
    switch self {
    case .data(let message, _, _), .end(let message, _, _, _): message
    }
  }

  /// The bytes of the frame on the wire.
  public var bytes: [UInt8] {
    switch self {
    case .data(let message, let sequence, let payload):
      return [Self.version, message] + sequence.littleEndianBytes + payload
    case .end(let message, let count, let length, let crc):
      let sequence = UInt16(truncatingIfNeeded: count)
      return [Self.version | Self.endFlag, message] + sequence.littleEndianBytes
        + count.littleEndianBytes + length.littleEndianBytes + crc.littleEndianBytes
    }
  }

  /// Parses a frame.
  ///
  /// - Throws: ``BluetoothError/Code/unsupportedVersion`` for another framing version;
  ///   ``BluetoothError/Code/malformedFrame`` for anything else that is not a frame.
  public init(parsing raw: some Collection<UInt8>) throws(BluetoothError) {
    let bytes = Array(raw)
    guard bytes.count >= Self.headerLength else {
      throw .malformedFrame("\(bytes.count) bytes, shorter than the 4-byte header")
    }
    let control = bytes[0]
    guard control & 0x0F == Self.version else { throw .unsupportedVersion(control & 0x0F) }
    guard control & 0x70 == 0 else {
      throw .malformedFrame("reserved control bits set (control byte \(control))")
    }
    let message = bytes[1]
    let sequence = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
    if control & Self.endFlag == 0 {
      guard bytes.count > Self.headerLength else {
        throw .malformedFrame("data frame \(sequence) of message \(message) has no payload")
      }
      self = .data(message: message, sequence: sequence, payload: Array(bytes[4...]))
    } else {
      guard bytes.count == Self.endFrameLength else {
        throw .malformedFrame("end frame of message \(message) has \(bytes.count) bytes, not 16")
      }
      let count = UInt32(littleEndian: bytes, at: 4)
      guard UInt16(truncatingIfNeeded: count) == sequence else {
        throw .malformedFrame(
          "end frame of message \(message): sequence \(sequence) disagrees with count \(count)")
      }
      self = .end(
        message: message, frameCount: count, length: UInt32(littleEndian: bytes, at: 8),
        crc: UInt32(littleEndian: bytes, at: 12))
    }
  }
}

extension FixedWidthInteger {
  /// The integer's bytes, least significant first.
  var littleEndianBytes: [UInt8] {
    (0..<(Self.bitWidth / 8)).map { UInt8(truncatingIfNeeded: self >> (8 * $0)) }
  }
}

extension UInt32 {
  /// Reads a little-endian UInt32 at `offset`; the caller checked the length.
  init(littleEndian bytes: [UInt8], at offset: Int) {
    self = (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
  }
}
