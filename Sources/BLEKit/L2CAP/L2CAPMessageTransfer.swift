// L2CAPMessageTransfer: sending and receiving one framed message over an open channel, with
// progress, verification and the acknowledgement that makes the sender's close safe.
import Synchronization

/// One message over an L2CAP channel in blekit's framing (``L2CAPMessageHeader``): the
/// sender's `send` returns only after the receiver confirmed the very bytes; the receiver's
/// `receive` returns only bytes that have the announced length and CRC-32.
public enum L2CAPMessageTransfer {
  /// Sends `message` and waits (at most `acknowledgementTimeout` after the last byte) for
  /// the receiver's acknowledgement. `progress` gets the bytes handed to the kernel so far.
  /// At most ``L2CAPMessageWindow/size`` bytes (plus one SDU) go out before the receiver
  /// confirms them; a receiver that confirms nothing for `acknowledgementTimeout` fails the
  /// send.
  ///
  /// - Throws: ``L2CAPError`` when the channel fails, ``L2CAPMessageError/notAcknowledged(_:)``
  ///   when the receiver does not confirm.
  public static func send(
    _ message: [UInt8], over channel: L2CAPChannel,
    acknowledgementTimeout: Duration = .seconds(30),
    progress: (@Sendable (_ sent: Int, _ total: Int) -> Void)? = nil
  ) async throws {
    let header = L2CAPMessageHeader(for: message)
    let answers = ReceiverAnswers(channel: channel, silence: acknowledgementTimeout)
    defer { answers.stop() }
    var bell = answers.doorbell.makeAsyncIterator()
    try await channel.send(header.bytes)
    var sent = 0
    while sent < message.count {
      try await answers.waitForRoom(sent: sent, bell: &bell)
      let end = min(sent + channel.sendMTU, message.count)
      try await channel.send(Array(message[sent..<end]))
      sent = end
      progress?(sent, message.count)
    }
    let answer = try await answers.final(bell: &bell)
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
    var confirmed = 0
    var senderGone = false
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
      if assembler.header.isWindowed, !assembler.isComplete, !senderGone,
        assembler.received - confirmed >= L2CAPMessageWindow.step
      {
        confirmed = assembler.received
        do {
          try await channel.send(L2CAPMessageWindow(received: confirmed).bytes)
        } catch {
          // The sender is gone (it closed, or the link was lost). What it sent before may
          // still be queued here: read on, and the channel's end reports how far it got.
          senderGone = true
        }
      }
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

/// What a sender hears from the receiver while it sends: window confirmations
/// (``L2CAPMessageWindow``), then the final answer. A task reads the channel in the background;
/// the sender waits on a doorbell rung at every SDU heard (and twice a second, so that a
/// silence is noticed).
private final class ReceiverAnswers: Sendable {
  private struct State {
    var confirmed = 0
    var answer: [UInt8]?
    var end: (any Error)?
    var lastHeard = ContinuousClock.now
  }
  private let state = Mutex(State())
  private let silence: Duration
  private let bell: AsyncStream<Void>.Continuation
  /// Rung at every SDU heard, at the channel's end, and twice a second.
  let doorbell: AsyncStream<Void>
  private let tasks = Mutex<[Task<Void, Never>]>([])

  init(channel: L2CAPChannel, silence: Duration) {
    self.silence = silence
    (doorbell, bell) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    let reader = Task { [self] in await self.read(channel) }
    let ticker = Task { [bell] in
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(500))
        bell.yield()
      }
    }
    tasks.withLock { $0 = [reader, ticker] }
  }

  private func read(_ channel: L2CAPChannel) async {
    do {
      for try await sdu in channel.incoming {
        let isAnswer = state.withLock { state in
          state.lastHeard = .now
          if let window = L2CAPMessageWindow(bytes: sdu) {
            state.confirmed = max(state.confirmed, window.received)
            return false
          }
          state.answer = sdu
          return true
        }
        bell.yield()
        if isAnswer { return }
      }
      state.withLock {
        $0.end = L2CAPMessageError.notAcknowledged(
          "the channel closed before the receiver answered")
      }
    } catch {
      state.withLock { $0.end = error }
    }
    bell.yield()
  }

  func stop() {
    for task in tasks.withLock({ $0 }) { task.cancel() }
    bell.finish()
  }

  /// Returns once fewer than ``L2CAPMessageWindow/size`` of the `sent` bytes are unconfirmed.
  func waitForRoom(sent: Int, bell: inout AsyncStream<Void>.Iterator) async throws {
    try await wait(bell: &bell) { state in
      guard state.answer == nil else {
        throw L2CAPMessageError.notAcknowledged("it answered before the message was complete")
      }
      return sent - state.confirmed < L2CAPMessageWindow.size
    }
  }

  /// The receiver's final answer.
  func final(bell: inout AsyncStream<Void>.Iterator) async throws -> [UInt8] {
    var answer: [UInt8] = []
    try await wait(bell: &bell) { state in
      guard let final = state.answer else { return false }
      answer = final
      return true
    }
    return answer
  }

  /// Waits until `ready` says so (it throws to give up); throws the channel's end, or
  /// ``L2CAPMessageError/notAcknowledged(_:)`` after `silence` without a word.
  private func wait(
    bell: inout AsyncStream<Void>.Iterator, until ready: (State) throws -> Bool
  ) async throws {
    while true {
      let current = state.withLock { $0 }
      if try ready(current) { return }
      if let end = current.end { throw end }
      if ContinuousClock.now - current.lastHeard > silence {
        throw L2CAPMessageError.notAcknowledged("no answer within \(silence)")
      }
      guard await bell.next() != nil else { throw CancellationError() }
    }
  }
}
