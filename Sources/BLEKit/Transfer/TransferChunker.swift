// TransferChunker: the sender side of Apple's sample's plain transfer protocol: the
// UTF-8 message in chunks of min(ATT MTU - 3, 512) bytes, then the literal "EOM".
//
// The plain protocol has no sequence numbers. When notifications travel on several ATT bearers
// (EATT, BlueZ 5.66's default `[GATT] Channels = 3`), chunks can arrive out of order, and a
// receiver cannot detect that in general: any permutation of the chunks is an equally valid
// byte string, often even valid UTF-8. Only blekit's sequenced framing
// (`SequencedTransferEncoder`) detects and repairs reordering.

/// Limits of the transfer protocol, shared by both ends.
public enum TransferLimits {
  /// The smallest ATT MTU on LE (Core Specification, Vol 3, Part F, 3.2.8).
  public static let minimumATTMTU = 23
  /// The largest attribute value (Core Specification, Vol 3, Part F, 3.2.9). BlueZ 5.66
  /// silently cuts longer notifications to this size (a 514-byte chunk arrives as 512 bytes).
  public static let maximumAttributeValueLength = 512
  /// The bytes of an ATT notification header (opcode and handle).
  public static let notificationHeaderLength = 3

  /// The largest notification value for an ATT MTU: min(MTU - 3, 512).
  ///
  /// - Throws: ``BluetoothError/Code/mtuTooSmall`` when `attMTU` is below 23.
  public static func maximumValueLength(forATTMTU attMTU: Int) throws(BluetoothError) -> Int {
    guard attMTU >= minimumATTMTU else { throw .mtuTooSmall(attMTU) }
    return min(attMTU - notificationHeaderLength, maximumAttributeValueLength)
  }
}

/// Splits a message into the sample's chunks, ending with `EOM`.
///
/// A value type to drive by hand: `nextChunk` is the chunk to send now; call `markSent()` once
/// the transport accepted it (CoreBluetooth's `updateValue` returning true, or a write to the
/// notify socket completing). When the transport is full, keep the chunk and try again later.
/// It is also a `Sequence` of all chunks, EOM included.
///
/// A data chunk is never exactly the three bytes `EOM`, which the receiver would take for the
/// end: when a chunk would be `EOM`, it is sent as `EO` and the `M` goes in the next chunk.
/// With an MTU of at least 23 that can only happen at the end of a message that ends in `EOM`.
public struct TransferChunker: Sequence, IteratorProtocol, Sendable {
  /// The end-of-message marker, the UTF-8 bytes of `EOM`.
  public static let endOfMessage: [UInt8] = Array("EOM".utf8)

  /// The whole message.
  public let message: [UInt8]
  /// The largest chunk: min(ATT MTU - 3, 512).
  public let chunkLength: Int
  /// How many message bytes were handed out with `markSent()`.
  public private(set) var bytesSent = 0
  /// Whether `EOM` was sent too.
  public private(set) var isFinished = false

  /// Creates a chunker for a text message.
  ///
  /// - Throws: ``BluetoothError/Code/mtuTooSmall`` when `attMTU` is below 23.
  public init(message: String, attMTU: Int) throws(BluetoothError) {
    try self.init(bytes: Array(message.utf8), attMTU: attMTU)
  }

  /// Creates a chunker for message bytes.
  ///
  /// - Throws: ``BluetoothError/Code/mtuTooSmall`` when `attMTU` is below 23.
  public init(bytes: [UInt8], attMTU: Int) throws(BluetoothError) {
    self.message = bytes
    self.chunkLength = try TransferLimits.maximumValueLength(forATTMTU: attMTU)
  }

  /// The next chunk to send (a data chunk, or `EOM` last), or `nil` when all were sent.
  public var nextChunk: [UInt8]? {
    if isFinished { return nil }
    if bytesSent == message.count { return Self.endOfMessage }
    let end = Swift.min(bytesSent + chunkLength, message.count)
    var chunk = Array(message[bytesSent..<end])
    if chunk == Self.endOfMessage { chunk.removeLast() }
    return chunk
  }

  /// Records that `nextChunk` was sent, so the following one becomes current.
  public mutating func markSent() {
    guard let chunk = nextChunk else { return }
    if bytesSent == message.count {
      isFinished = true
    } else {
      bytesSent += chunk.count
    }
  }

  /// Returns the next chunk and marks it sent.
  public mutating func next() -> [UInt8]? {
    defer { markSent() }
    return nextChunk
  }
}
