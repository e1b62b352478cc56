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
  /// The bytes received so far in the current message (joined from the parts they are kept
  /// in: a copy each time it is read).
  public var received: [UInt8] { joined() }
  /// The data chunks received so far in the current message.
  public private(set) var chunksReceived = 0
  /// How many message bytes arrived so far in the current message.
  public private(set) var bytesReceived = 0

  /// The message's bytes in parts of ``partSize`` (the last one being filled): a message that
  /// grew in one array would be copied whole each time the array doubled, about its own size
  /// again in copies (a quarter of `blekit receive`'s instructions per value in
  /// `scripts/bench-receive`); parts are copied once, when the message is complete, and a
  /// message of one part not at all.
  private var parts: [[UInt8]] = []
  private var last: [UInt8] = []
  static let partSize = 64 << 10

  /// Creates a reassembler.
  public init(maximumMessageLength: Int = defaultMaximumMessageLength) {
    self.maximumMessageLength = maximumMessageLength
  }

  /// Takes one notification value. Returns the message's bytes when the value is `EOM`, `nil`
  /// when more is expected. After a message (or an error), the reassembler starts afresh.
  ///
  /// - Throws: ``BluetoothError/Code/messageTooLarge`` when the message outgrows
  ///   `maximumMessageLength`.
  public mutating func receive(_ chunk: some Collection<UInt8>) throws(BluetoothError)
    -> [UInt8]?
  {
    if chunk.elementsEqual(TransferChunker.endOfMessage) {
      let bytes = joined()
      reset()
      return bytes
    }
    guard bytesReceived + chunk.count <= maximumMessageLength else {
      reset()
      throw .messageTooLarge(limit: maximumMessageLength)
    }
    if last.capacity - last.count < chunk.count {
      if !last.isEmpty { parts.append(last) }
      last = []
      last.reserveCapacity(max(Self.partSize, chunk.count))
    }
    last.append(contentsOf: chunk)
    bytesReceived += chunk.count
    chunksReceived += 1
    return nil
  }

  /// The error to report when the transfer stops before `EOM`: ``BluetoothError/Code/transferInterrupted``
  /// with the bytes and chunks received in ``BluetoothError/interruptedTransfer``.
  public var incompleteError: BluetoothError {
    .incomplete(bytesReceived: bytesReceived, chunksReceived: chunksReceived)
  }

  /// Drops the current partial message.
  public mutating func reset() {
    parts = []
    last = []
    bytesReceived = 0
    chunksReceived = 0
  }

  private func joined() -> [UInt8] {
    guard !parts.isEmpty else {
      // A short message is not handed over in a part's worth of memory.
      return last.capacity - last.count > 4_096
        ? last.withUnsafeBufferPointer { [UInt8]($0) } : last
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(bytesReceived)
    for part in parts { bytes.append(contentsOf: part) }
    bytes.append(contentsOf: last)
    return bytes
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
