// SequencedTransferEncoder: the sender side of blekit's sequenced transfer framing (wire
// format in SequencedFrame.swift).

/// Splits a message into sequenced frames: data frames in order, then the end frame.
///
/// Driven like `TransferChunker`: send `nextFrame`, call `markSent()` once the transport
/// accepted it, keep the frame when the transport is full. Also a `Sequence` of frame bytes.
///
/// Give each message sent on the same subscription a new `messageNumber` (0, 1, 2, ... modulo
/// 256): a receiver ignores frames of the last 16 message numbers it delivered, as late
/// duplicates.
public struct SequencedTransferEncoder: Sequence, IteratorProtocol, Sendable {
  /// The whole message.
  public let message: [UInt8]
  /// The message number written in every frame.
  public let messageNumber: UInt8
  /// The largest frame: min(ATT MTU - 3, 512).
  public let maximumFrameLength: Int
  /// The shortest frame length: a 4-byte header and the least data payload a receiver takes.
  public static let minimumFrameLength =
    SequencedFrame.headerLength + SequencedTransferDecoder.minimumDataFramePayload
  /// How many message bytes were handed out with `markSent()`.
  public private(set) var bytesSent = 0
  /// How many data frames were handed out with `markSent()`.
  public private(set) var framesSent = 0
  /// Whether the end frame was sent too.
  public private(set) var isFinished = false
  private let crc: UInt32

  /// Creates an encoder for a text message at an ATT MTU.
  ///
  /// - Throws: ``BluetoothError/Code/mtuTooSmall`` when `attMTU` is below 23;
  ///   ``BluetoothError/Code/messageTooLarge`` above 4 GiB - 1.
  public init(message: String, attMTU: Int, messageNumber: UInt8 = 0) throws(BluetoothError) {
    try self.init(bytes: Array(message.utf8), attMTU: attMTU, messageNumber: messageNumber)
  }

  /// Creates an encoder for message bytes at an ATT MTU.
  ///
  /// - Throws: ``BluetoothError/Code/mtuTooSmall`` when `attMTU` is below 23;
  ///   ``BluetoothError/Code/messageTooLarge`` above 4 GiB - 1.
  public init(bytes: [UInt8], attMTU: Int, messageNumber: UInt8 = 0) throws(BluetoothError) {
    let length = try TransferLimits.maximumValueLength(forATTMTU: attMTU)
    try self.init(bytes: bytes, maximumFrameLength: length, messageNumber: messageNumber)
  }

  /// Creates an encoder with an explicit frame length (at least 20, the largest value at LE's
  /// minimum ATT MTU of 23, whose 16-byte payload is the least a receiver takes in more than
  /// one frame per message). Small frames are useful to test sequence-number wrap-around.
  ///
  /// - Throws: ``BluetoothError/Code/malformedFrame`` when the frame length is below 20 or above 512;
  ///   ``BluetoothError/Code/messageTooLarge`` above 4 GiB - 1.
  public init(bytes: [UInt8], maximumFrameLength: Int, messageNumber: UInt8 = 0)
    throws(BluetoothError)
  {
    guard
      (Self.minimumFrameLength...TransferLimits.maximumAttributeValueLength)
        .contains(maximumFrameLength)
    else {
      throw .malformedFrame("frame length \(maximumFrameLength) is outside 20...512")
    }
    guard bytes.count <= Int(UInt32.max) else { throw .messageTooLarge(limit: Int(UInt32.max)) }
    self.message = bytes
    self.messageNumber = messageNumber
    self.maximumFrameLength = maximumFrameLength
    self.crc = CRC32.checksum(bytes)
  }

  /// Message bytes per data frame: the frame length less the 4-byte header.
  public var payloadLength: Int { maximumFrameLength - SequencedFrame.headerLength }

  /// How many data frames the message takes.
  public var dataFrameCount: Int { (message.count + payloadLength - 1) / payloadLength }

  /// The next frame to send, or `nil` when all were sent.
  public var nextFrame: SequencedFrame? {
    if isFinished { return nil }
    if bytesSent == message.count {
      return .end(
        message: messageNumber, frameCount: UInt32(framesSent),
        length: UInt32(message.count), crc: crc)
    }
    let end = Swift.min(bytesSent + payloadLength, message.count)
    return .data(
      message: messageNumber, sequence: UInt16(truncatingIfNeeded: framesSent),
      payload: Array(message[bytesSent..<end]))
  }

  /// Records that `nextFrame` was sent.
  public mutating func markSent() {
    switch nextFrame {
    case .data(_, _, let payload):
      bytesSent += payload.count
      framesSent += 1
    case .end:
      isFinished = true
    case nil:
      break
    }
  }

  /// Returns the next frame's bytes and marks it sent.
  public mutating func next() -> [UInt8]? {
    defer { markSent() }
    return nextFrame?.bytes
  }
}
