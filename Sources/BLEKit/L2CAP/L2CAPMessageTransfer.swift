// L2CAPMessageTransfer: sending and receiving one framed message over an open channel, with
// progress, verification and the acknowledgement that makes the sender's close safe.

/// One message over an L2CAP channel in blekit's framing (``L2CAPMessageHeader``): the
/// sender's `send` returns only after the receiver confirmed the very bytes; the receiver's
/// `receive` returns only bytes that have the announced length and CRC-32.
public enum L2CAPMessageTransfer {
  /// Sends `message` and waits (at most `acknowledgementTimeout` after the last byte) for
  /// the receiver's acknowledgement. `progress` gets the bytes handed to the kernel so far.
  ///
  /// - Throws: ``L2CAPError`` when the channel fails, ``L2CAPMessageError/notAcknowledged(_:)``
  ///   when the receiver does not confirm.
  public static func send(
    _ message: [UInt8], over channel: L2CAPChannel,
    acknowledgementTimeout: Duration = .seconds(30),
    progress: (@Sendable (_ sent: Int, _ total: Int) -> Void)? = nil
  ) async throws {
    let header = L2CAPMessageHeader(for: message)
    try await channel.send(header.bytes)
    var sent = 0
    while sent < message.count {
      let end = min(sent + channel.sendMTU, message.count)
      try await channel.send(Array(message[sent..<end]))
      sent = end
      progress?(sent, message.count)
    }
    let answer: [UInt8]? = try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
      group.addTask {
        var iterator = channel.incoming.makeAsyncIterator()
        return try await iterator.next()
      }
      group.addTask {
        try await Task.sleep(for: acknowledgementTimeout)
        throw L2CAPMessageError.notAcknowledged("no answer within \(acknowledgementTimeout)")
      }
      defer { group.cancelAll() }
      return try await group.next() ?? nil
    }
    guard let answer else {
      throw L2CAPMessageError.notAcknowledged("the channel closed before the receiver answered")
    }
    guard let acknowledgement = L2CAPMessageAcknowledgement(bytes: answer),
      acknowledgement.checksum == header.checksum
    else {
      throw L2CAPMessageError.notAcknowledged("its answer (\(answer.count) bytes) is not ours")
    }
  }

  /// Receives one message (at most `limit` bytes), verifies it, and acknowledges it.
  /// `progress` gets the bytes received so far and the announced total.
  ///
  /// - Throws: ``L2CAPMessageError`` (`cut` when the channel ends early, `checksumMismatch`,
  ///   `notAMessage`, ...), or ``L2CAPError`` when the link is lost. Nothing unverified is
  ///   ever returned.
  public static func receive(
    over channel: L2CAPChannel, limit: Int,
    progress: (@Sendable (_ received: Int, _ total: Int) -> Void)? = nil
  ) async throws -> [UInt8] {
    var iterator = channel.incoming.makeAsyncIterator()
    guard let first = try await iterator.next() else {
      throw L2CAPMessageError.notAMessage("the channel closed before any byte arrived")
    }
    var assembler = try L2CAPMessageAssembler(headerSDU: first, limit: limit)
    while !assembler.isComplete {
      let sdu: [UInt8]?
      do {
        sdu = try await iterator.next()
      } catch is L2CAPError {
        // A lost link is a cut transfer: what matters is how far it got.
        throw L2CAPMessageError.cut(
          received: assembler.received, expected: assembler.header.length)
      }
      guard let sdu else {
        throw L2CAPMessageError.cut(received: assembler.received, expected: assembler.header.length)
      }
      try assembler.append(sdu)
      progress?(assembler.received, assembler.header.length)
    }
    let message = try assembler.verified()
    try await channel.send(L2CAPMessageAcknowledgement(checksum: assembler.header.checksum).bytes)
    // The sender closes once it has the answer; closing here first could drop the answer
    // (the kernel discards what it has not sent when a channel closes). Wait for that close,
    // a few seconds at most: the message is verified whatever happens now.
    let limit = Task {
      try? await Task.sleep(for: .seconds(5))
      if !Task.isCancelled { channel.close() }
    }
    while (try? await iterator.next()) ?? nil != nil {}
    limit.cancel()
    return message
  }
}
