// TransferErrors: BluetoothError's codes for the transfer protocols' own checks, plain and
// sequenced (and the L2CAP message framing's, which shares the size and integrity checks).

extension BluetoothError.Code {
  /// The ATT MTU is below LE's minimum of 23 (``BluetoothError/size``, ``BluetoothError/limit``).
  public static let mtuTooSmall = Self(rawValue: "mtuTooSmall")
  /// A message is larger than the receiver accepts or the framing can carry
  /// (``BluetoothError/limit``; ``BluetoothError/size`` when the length was announced).
  public static let messageTooLarge = Self(rawValue: "messageTooLarge")
  /// The message bytes are not valid UTF-8; ``BluetoothError/offset`` is where the first bad
  /// sequence starts, ``BluetoothError/size`` the message's length.
  public static let invalidUTF8 = Self(rawValue: "invalidUTF8")
  /// A sequenced frame could not be parsed.
  public static let malformedFrame = Self(rawValue: "malformedFrame")
  /// A sequenced frame uses a framing version this receiver does not know
  /// (``BluetoothError/framingVersion``).
  public static let unsupportedVersion = Self(rawValue: "unsupportedVersion")
  /// A message has another length than its sender announced (``BluetoothError/size``
  /// against ``BluetoothError/limit``).
  public static let lengthMismatch = Self(rawValue: "lengthMismatch")
  /// A message fails its CRC-32 check (``BluetoothError/checksums``).
  public static let checksumMismatch = Self(rawValue: "checksumMismatch")
  /// Too many sequenced messages are incomplete at once (``BluetoothError/limit``).
  public static let tooManyMessagesInFlight = Self(rawValue: "tooManyMessagesInFlight")
  /// The peer offers only plain chunks and their order cannot be guaranteed on this link
  /// (see ``TransferOrder``); nothing was received.
  public static let orderNotGuaranteed = Self(rawValue: "orderNotGuaranteed")
  /// The peer's plain chunks arrived while a queue on their way backed up far enough for some
  /// to be dropped: the AcquireNotify socket (bluetoothd drops), or the kernel's ATT queue
  /// (the kernel drops; see ``NotificationStream/lossCheck()``). Without numbers on the
  /// chunks, the message cannot be vouched for; it is not returned.
  public static let chunksMayBeLost = Self(rawValue: "chunksMayBeLost")
}

extension BluetoothError {
  /// An ATT MTU below 23.
  package static func mtuTooSmall(_ mtu: Int) -> BluetoothError {
    var error = BluetoothError(.mtuTooSmall, "ATT MTU \(mtu) is too small: LE requires at least 23")
    error.size = mtu
    error.limit = 23
    return error
  }

  /// A transfer that ended before the end of its message, with nothing known of its cause.
  package static func incomplete(bytesReceived: Int, chunksReceived: Int) -> BluetoothError {
    var error = transferInterrupted(
      bytesReceived: bytesReceived, chunksReceived: chunksReceived, cause: nil)
    error.message =
      "transfer cut before end of message: \(bytesReceived) bytes received in \(chunksReceived) chunks"
    return error
  }

  /// `byteCount` bytes that are not UTF-8 from `offset` on.
  package static func invalidUTF8(byteCount: Int, offset: Int) -> BluetoothError {
    var error = BluetoothError(
      .invalidUTF8,
      "message of \(byteCount) bytes is not valid UTF-8 (first bad byte at offset \(offset))")
    error.size = byteCount
    error.offset = offset
    return error
  }

  /// A message past `limit` bytes.
  package static func messageTooLarge(limit: Int) -> BluetoothError {
    var error = BluetoothError(.messageTooLarge, "message exceeds the limit of \(limit) bytes")
    error.limit = limit
    return error
  }

  /// A sequenced frame that is not one.
  package static func malformedFrame(_ reason: String) -> BluetoothError {
    BluetoothError(.malformedFrame, "malformed transfer frame: \(reason)")
  }

  /// A sequenced frame of an unknown framing version.
  package static func unsupportedVersion(_ version: UInt8) -> BluetoothError {
    var error = BluetoothError(
      .unsupportedVersion, "unsupported transfer framing version \(version)")
    error.framingVersion = version
    return error
  }

  /// A reassembled sequenced message whose length is not its end frame's.
  package static func lengthMismatch(message: UInt8, expected: Int, actual: Int) -> BluetoothError {
    var error = BluetoothError(
      .lengthMismatch, "message \(message) has \(actual) bytes, its end frame announced \(expected)"
    )
    error.messageNumber = message
    error.size = actual
    error.limit = expected
    return error
  }

  /// A reassembled sequenced message that fails its CRC-32.
  package static func checksumMismatch(message: UInt8, expected: UInt32, actual: UInt32)
    -> BluetoothError
  {
    var error = BluetoothError(
      .checksumMismatch,
      "message \(message) is corrupt: CRC-32 is \(CRC32.text(actual)), sender's is "
        + CRC32.text(expected))
    error.messageNumber = message
    error.checksums = ChecksumMismatch(expected: expected, actual: actual)
    return error
  }

  /// More than `limit` sequenced messages incomplete at once.
  package static func tooManyMessagesInFlight(limit: Int) -> BluetoothError {
    var error = BluetoothError(
      .tooManyMessagesInFlight, "more than \(limit) messages incomplete at once")
    error.limit = limit
    return error
  }

  /// Plain chunks whose order is not guaranteed here; `why` says why.
  package static func orderNotGuaranteed(_ why: String) -> BluetoothError {
    BluetoothError(
      .orderNotGuaranteed,
      "the peer sends plain chunks without sequence numbers and their order is not "
        + "guaranteed here: \(why)")
  }

  /// Plain chunks some of which may have been dropped; `why` says where.
  package static func chunksMayBeLost(_ why: String) -> BluetoothError {
    BluetoothError(
      .chunksMayBeLost,
      "the peer sends plain chunks without sequence numbers and some may have been lost: \(why)")
  }
}
