// TransferReassembler: the receiver side of the sample's plain transfer protocol: append chunks
// until "EOM", then hand over the bytes.

/// Reassembles the sample's chunked message.
///
/// Feed each notification value to `receive(_:)`. A message is bytes (text, an image, a
/// firmware blob): `receive(_:)` returns them exactly at `EOM`; decoding text is the caller's
/// business (a multi-byte character may straddle two chunks, so only the whole message can be
/// decoded). If the transfer stops before `EOM`, `incompleteError` describes what arrived (the
/// partial bytes are never the message).
///
/// The plain protocol cannot detect reordered chunks (see `TransferChunker`); use the sequenced
/// framing between blekit ends.
public struct TransferReassembler: Sendable {
  /// The default limit on a message's size: 16 MiB.
  public static let defaultMaximumMessageLength = 16 << 20

  /// The largest message accepted.
  public let maximumMessageLength: Int
  /// The bytes received so far in the current message.
  public private(set) var received: [UInt8] = []
  /// The data chunks received so far in the current message.
  public private(set) var chunksReceived = 0

  /// Creates a reassembler.
  public init(maximumMessageLength: Int = defaultMaximumMessageLength) {
    self.maximumMessageLength = maximumMessageLength
  }

  /// How many message bytes arrived so far in the current message.
  public var bytesReceived: Int { received.count }

  /// Takes one notification value. Returns the message's bytes when the value is `EOM`, `nil`
  /// when more is expected. After a message (or an error), the reassembler starts afresh.
  ///
  /// - Throws: ``BluetoothError/Code/messageTooLarge`` when the message outgrows
  ///   `maximumMessageLength`.
  public mutating func receive(_ chunk: some Collection<UInt8>) throws(BluetoothError)
    -> [UInt8]?
  {
    if chunk.elementsEqual(TransferChunker.endOfMessage) {
      let bytes = received
      reset()
      return bytes
    }
    guard received.count + chunk.count <= maximumMessageLength else {
      reset()
      throw .messageTooLarge(limit: maximumMessageLength)
    }
    received.append(contentsOf: chunk)
    chunksReceived += 1
    return nil
  }

  /// The error to report when the transfer stops before `EOM`: ``BluetoothError/Code/transferInterrupted``
  /// with the bytes and chunks received in ``BluetoothError/interruptedTransfer``.
  public var incompleteError: BluetoothError {
    .incomplete(bytesReceived: received.count, chunksReceived: chunksReceived)
  }

  /// Drops the current partial message.
  public mutating func reset() {
    received = []
    chunksReceived = 0
  }
}

/// Strict UTF-8 decoding with the offset of the first invalid byte.
enum UTF8Text {
  /// Decodes `bytes` as UTF-8, or throws ``BluetoothError/Code/invalidUTF8`` naming the offset of the
  /// first invalid sequence.
  static func decode(_ bytes: [UInt8]) throws(BluetoothError) -> String {
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    throw .invalidUTF8(byteCount: bytes.count, offset: firstInvalidOffset(bytes) ?? 0)
  }

  /// The offset where the first invalid UTF-8 sequence starts, or `nil` if all are valid.
  static func firstInvalidOffset(_ bytes: [UInt8]) -> Int? {
    var parser = Unicode.UTF8.ForwardParser()
    var iterator = bytes.makeIterator()
    var offset = 0
    while true {
      switch parser.parseScalar(from: &iterator) {
      case .valid(let encoded): offset += encoded.count
      case .error: return offset
      case .emptyInput: return nil
      }
    }
  }
}
