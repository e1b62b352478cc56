// TransferError: what can go wrong in the transfer protocols, plain and sequenced.

/// An error of the transfer protocols. Every case describes itself in one line.
public enum TransferError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The ATT MTU is below LE's minimum of 23.
  case mtuTooSmall(Int)
  /// The transfer ended (disconnect, unsubscribe, timeout) before the end of the message.
  case incomplete(bytesReceived: Int, chunksReceived: Int)
  /// The message bytes are not valid UTF-8; `offset` is where the first bad sequence starts.
  case invalidUTF8(byteCount: Int, offset: Int)
  /// The message grew past the receiver's limit.
  case messageTooLarge(limit: Int)
  /// A sequenced frame could not be parsed.
  case malformedFrame(String)
  /// A sequenced frame uses a framing version this receiver does not know.
  case unsupportedVersion(UInt8)
  /// The reassembled sequenced message has a different length than its end frame announced.
  case lengthMismatch(message: UInt8, expected: Int, actual: Int)
  /// The reassembled sequenced message fails its CRC-32 check.
  case checksumMismatch(message: UInt8, expected: UInt32, actual: UInt32)
  /// Too many sequenced messages are incomplete at once.
  case tooManyMessagesInFlight(limit: Int)
  /// The peer offers only plain chunks and their order cannot be guaranteed on this link
  /// (see ``TransferOrder``); nothing was received.
  case orderNotGuaranteed(String)
  /// The peer's plain chunks arrived while a queue on their way backed up far enough for some
  /// to be dropped: the AcquireNotify socket (bluetoothd drops), or the kernel's ATT queue
  /// (the kernel drops; see ``NotificationStream/lossCheck()``). Without numbers on the
  /// chunks, the message cannot be vouched for; it is not returned.
  case chunksMayBeLost(String)

  public var description: String {
    switch self {
    case .mtuTooSmall(let mtu):
      "ATT MTU \(mtu) is too small: LE requires at least 23"
    case .incomplete(let bytes, let chunks):
      "transfer cut before end of message: \(bytes) bytes received in \(chunks) chunks"
    case .invalidUTF8(let count, let offset):
      "message of \(count) bytes is not valid UTF-8 (first bad byte at offset \(offset))"
    case .messageTooLarge(let limit):
      "message exceeds the limit of \(limit) bytes"
    case .malformedFrame(let reason):
      "malformed transfer frame: \(reason)"
    case .unsupportedVersion(let version):
      "unsupported transfer framing version \(version)"
    case .lengthMismatch(let message, let expected, let actual):
      "message \(message) has \(actual) bytes, its end frame announced \(expected)"
    case .checksumMismatch(let message, let expected, let actual):
      "message \(message) is corrupt: CRC-32 is \(CRC32.text(actual)), sender's is \(CRC32.text(expected))"
    case .tooManyMessagesInFlight(let limit):
      "more than \(limit) messages incomplete at once"
    case .orderNotGuaranteed(let why):
      "the peer sends plain chunks without sequence numbers and their order is not "
        + "guaranteed here: \(why)"
    case .chunksMayBeLost(let why):
      "the peer sends plain chunks without sequence numbers and some may have been lost: \(why)"
    }
  }
}
