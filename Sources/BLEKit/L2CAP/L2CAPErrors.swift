// L2CAPErrors: BluetoothError's codes for L2CAP channels and blekit's message framing over
// them, with the kernel's errno kept.
#if canImport(Glibc)
  import Glibc
#endif

extension BluetoothError.Code {
  /// The kernel has no Bluetooth sockets (no `AF_BLUETOOTH`, or no such adapter).
  public static let l2capUnavailable = Self(rawValue: "l2capUnavailable")
  /// The PSM is taken by another listener on this adapter.
  public static let addressInUse = Self(rawValue: "addressInUse")
  /// Nothing listens on the PSM at the peer (the peer answered "SPSM not supported"), or the
  /// peer refused the channel.
  public static let channelRefused = Self(rawValue: "channelRefused")
  /// The peer requires more security (encryption, authentication) than the link has.
  public static let insufficientSecurity = Self(rawValue: "insufficientSecurity")
  /// The link to the peer was lost (supervision timeout, the local side ended it, ...).
  public static let linkLost = Self(rawValue: "linkLost")
  /// The channel is closed (by this side, or the peer closed it): nothing more can be sent.
  public static let channelClosed = Self(rawValue: "channelClosed")
  /// An SDU larger than the peer accepts (its MTU, in ``BluetoothError/limit``).
  public static let sduTooLarge = Self(rawValue: "sduTooLarge")
  /// The first SDU on a channel is not blekit's message header (another protocol, a corrupt
  /// header, or a framing version this side does not know).
  public static let notAMessage = Self(rawValue: "notAMessage")
  /// The receiver of an L2CAP message did not confirm it (the channel ended, or its answer was
  /// wrong).
  public static let notAcknowledged = Self(rawValue: "notAcknowledged")
}

extension BluetoothError {
  /// Maps an errno from `operation` ("connect", "bind", ...) on an L2CAP socket to a code and
  /// a message that names it. A refusal by the kernel is ``Code/notPermitted``, an expired
  /// connect ``Code/timeout``, anything unrecognised ``Code/system``.
  static func fromErrno(_ number: Int32, _ operation: String) -> BluetoothError {
    let text = String(cString: strerror(number))
    let code: Code
    switch number {
    case EAFNOSUPPORT, EPROTONOSUPPORT, ESOCKTNOSUPPORT, EHOSTUNREACH, ENODEV:
      code = .l2capUnavailable
    case EPERM: code = .notPermitted
    case EACCES: code = operation == "connect" ? .insufficientSecurity : .notPermitted
    case EADDRINUSE: code = .addressInUse
    case ECONNREFUSED: code = .channelRefused
    case ETIMEDOUT: code = .timeout
    case ECONNABORTED, EHOSTDOWN, ENOTCONN, ENETDOWN, ENETRESET: code = .linkLost
    case ECONNRESET, EPIPE, EBADFD: code = .channelClosed
    case EMSGSIZE: code = .sduTooLarge
    default: code = .system
    }
    return BluetoothError(code, "\(operation): \(text)", errno: number)
  }

  /// The first SDU is not a message header; `why` says what it is.
  package static func notAMessage(_ why: String) -> BluetoothError {
    BluetoothError(.notAMessage, "not a blekit message over L2CAP: \(why)")
  }

  /// A message header announcing more than the receiver accepts.
  package static func tooLarge(length: Int, limit: Int) -> BluetoothError {
    var error = BluetoothError(
      .messageTooLarge, "the message announces \(length) bytes, more than the limit of \(limit)")
    error.size = length
    error.limit = limit
    return error
  }

  /// The channel ended before the announced length arrived.
  package static func cut(received: Int, sdus: Int, expected: Int) -> BluetoothError {
    var error = BluetoothError(
      .transferInterrupted, "the channel ended after \(received) of \(expected) bytes")
    error.interruptedTransfer = InterruptedTransfer(
      bytesReceived: received, chunksReceived: sdus, cause: nil, bytesExpected: expected)
    return error
  }

  /// More bytes came than the header announced.
  package static func trailingBytes(expected: Int, received: Int) -> BluetoothError {
    var error = BluetoothError(
      .lengthMismatch, "\(received) bytes arrived where \(expected) were announced")
    error.size = received
    error.limit = expected
    return error
  }

  /// The message's bytes fail the header's CRC-32.
  package static func checksumMismatch(expected: UInt32, actual: UInt32) -> BluetoothError {
    var error = BluetoothError(
      .checksumMismatch,
      "the message is corrupt: CRC-32 is \(CRC32.text(actual)), the sender's is "
        + CRC32.text(expected))
    error.checksums = ChecksumMismatch(expected: expected, actual: actual)
    return error
  }

  /// The receiver did not confirm the message.
  package static func notAcknowledged(_ why: String) -> BluetoothError {
    BluetoothError(.notAcknowledged, "the receiver did not confirm the message: \(why)")
  }

  /// A ``TransferDeadlines`` limit passed: `done` of `total` bytes had arrived in `sdus` SDUs
  /// (a receiver) or been confirmed (a sender, `sdus` 0); `total` is 0 before a header arrived.
  package static func timedOut(
    _ expiry: TransferDeadlines.Expiry, done: Int, sdus: Int = 0, total: Int
  ) -> BluetoothError {
    var error = BluetoothError(
      .transferInterrupted, "the transfer stopped at \(done) of \(total) bytes: \(expiry)")
    error.interruptedTransfer = InterruptedTransfer(
      bytesReceived: done, chunksReceived: sdus, cause: .timeout,
      bytesExpected: total > 0 ? total : nil, expiry: expiry)
    return error
  }
}
