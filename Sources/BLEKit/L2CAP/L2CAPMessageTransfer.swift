// L2CAPMessageTransfer: sending and receiving one framed message over an open channel, with
// progress, verification and the acknowledgement that makes the sender's close safe.
import Synchronization

/// One message over an L2CAP channel in blekit's framing (``L2CAPMessageHeader``): the
/// sender's `send` returns only after the receiver confirmed the very bytes; the receiver's
/// `receive` returns only bytes that have the announced length and CRC-32.
public enum L2CAPMessageTransfer {
  /// Sends `message` and waits for the receiver's acknowledgement, within `deadlines`: the whole
  /// send within its deadline, and never longer than its idle timeout without progress (bytes
  /// handed to the kernel, or confirmed by the receiver). At most ``L2CAPMessageWindow/size``
  /// bytes (plus one SDU) go out before the receiver confirms them, so a receiver that
  /// confirms nothing, or confirms the same count again and again, fails the send after the
  /// idle timeout. When a limit passes the channel is closed. `progress` gets the bytes handed
  /// to the kernel so far.
  ///
  /// - Throws: ``BluetoothError``: the channel's codes when it fails,
  ///   ``BluetoothError/Code/notAcknowledged`` when the receiver answers wrongly or closes,
  ///   ``BluetoothError/Code/transferInterrupted`` with cause ``BluetoothError/Code/timeout``
  ///   and the ``BluetoothError/InterruptedTransfer/expiry`` when a limit passed.
  public static func send(
    _ message: [UInt8], over channel: L2CAPChannel,
    deadlines: TransferDeadlines = TransferDeadlines(),
    progress: (@Sendable (_ sent: Int, _ total: Int) -> Void)? = nil
  ) async throws {
    let watch = ProgressWatch(deadlines)
    watch.start { _ in channel.close() }
    defer { watch.stop() }
    let answers = ReceiverAnswers(channel: channel, watch: watch)
    defer { answers.stop() }
    do {
      try await send(message, over: channel, answers: answers, progress: progress)
    } catch {
      if let expiry = watch.expired {
        throw BluetoothError.timedOut(expiry, done: answers.confirmed, total: message.count)
      }
      throw error
    }
  }

  /// Sends as ``send(_:over:deadlines:progress:)`` does, with `acknowledgementTimeout` as the
  /// idle timeout.
  @available(*, deprecated, renamed: "send(_:over:deadlines:progress:)")
  public static func send(
    _ message: [UInt8], over channel: L2CAPChannel, acknowledgementTimeout: Duration,
    progress: (@Sendable (_ sent: Int, _ total: Int) -> Void)? = nil
  ) async throws {
    try await send(
      message, over: channel, deadlines: TransferDeadlines(idleTimeout: acknowledgementTimeout),
      progress: progress)
  }

  private static func send(
    _ message: [UInt8], over channel: L2CAPChannel, answers: ReceiverAnswers,
    progress: (@Sendable (_ sent: Int, _ total: Int) -> Void)?
  ) async throws {
    let header = L2CAPMessageHeader(for: message)
    var bell = answers.doorbell.makeAsyncIterator()
    try await channel.send(header.bytes)
    var sent = 0
    while sent < message.count {
      try await answers.waitForRoom(sent: sent, bell: &bell)
      let end = min(sent + channel.sendMTU, message.count)
      try await channel.send(Array(message[sent..<end]))
      sent = end
      answers.sent(sent)
      progress?(sent, message.count)
    }
    let answer = try await answers.final(bell: &bell)
    guard let acknowledgement = L2CAPMessageAcknowledgement(bytes: answer),
      acknowledgement.checksum == header.checksum
    else {
      throw BluetoothError.notAcknowledged("its answer (\(answer.count) bytes) is not ours")
    }
  }

  /// Receives one message (at most `limit` bytes), verifies it, and acknowledges it, within
  /// `deadlines`: the whole message within its deadline, and never longer than its idle timeout
  /// without a new byte (an empty SDU is not progress). When a limit passes the channel is
  /// closed. Memory grows with the bytes that arrive, not with the length the header announces.
  /// `progress` gets the bytes received so far and the announced total.
  ///
  /// - Throws: ``BluetoothError``: ``BluetoothError/Code/transferInterrupted`` when the channel
  ///   or the link ends early or a limit passes (its ``BluetoothError/interruptedTransfer``
  ///   says how far it got), ``BluetoothError/Code/checksumMismatch``,
  ///   ``BluetoothError/Code/lengthMismatch``, ``BluetoothError/Code/notAMessage``,
  ///   ``BluetoothError/Code/messageTooLarge``. Nothing unverified is ever returned.
  public static func receive(
    over channel: L2CAPChannel, limit: Int, deadlines: TransferDeadlines = TransferDeadlines(),
    progress: (@Sendable (_ received: Int, _ total: Int) -> Void)? = nil
  ) async throws -> [UInt8] {
    let watch = ProgressWatch(deadlines)
    watch.start { _ in channel.close() }
    defer { watch.stop() }
    let reached = Mutex((received: 0, sdus: 0, total: 0))
    do {
      return try await receive(over: channel, limit: limit, watch: watch) {
        received, sdus, total in
        reached.withLock { $0 = (received, sdus, total) }
        // The header alone (0 bytes) only sets the total for a timeout's message.
        if received > 0 { progress?(received, total) }
      }
    } catch {
      if let expiry = watch.expired {
        let (received, sdus, total) = reached.withLock { $0 }
        throw BluetoothError.timedOut(expiry, done: received, sdus: sdus, total: total)
      }
      throw error
    }
  }

  private static func receive(
    over channel: L2CAPChannel, limit: Int, watch: ProgressWatch,
    progress: @Sendable (_ received: Int, _ sdus: Int, _ total: Int) -> Void
  ) async throws -> [UInt8] {
    var iterator = channel.incoming.makeAsyncIterator()
    guard let first = try await iterator.next() else {
      throw BluetoothError.notAMessage("the channel closed before any byte arrived")
    }
    var assembler = try L2CAPMessageAssembler(headerSDU: first, limit: limit)
    progress(0, 0, assembler.header.length)
    var confirmed = 0
    var senderGone = false
    while !assembler.isComplete {
      let sdu: [UInt8]?
      do {
        sdu = try await iterator.next()
      } catch is BluetoothError {
        // A lost link is a cut transfer: what matters is how far it got.
        throw BluetoothError.cut(
          received: assembler.received, sdus: assembler.sdus, expected: assembler.header.length)
      }
      guard let sdu else {
        throw BluetoothError.cut(
          received: assembler.received, sdus: assembler.sdus, expected: assembler.header.length)
      }
      try assembler.append(sdu)
      watch.progressed(to: assembler.received)
      progress(assembler.received, assembler.sdus, assembler.header.length)
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
    watch.stop()
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
/// the sender waits on a doorbell rung at every SDU heard and at the channel's end. Bytes sent
/// and bytes newly confirmed are the send's progress (``ProgressWatch``); a confirmation of
/// nothing new is not.
private final class ReceiverAnswers: Sendable {
  private struct State {
    var sent = 0
    var confirmed = 0
    var answer: [UInt8]?
    var end: (any Error)?
  }
  private let state = Mutex(State())
  private let watch: ProgressWatch
  private let bell: AsyncStream<Void>.Continuation
  /// Rung at every SDU heard and at the channel's end.
  let doorbell: AsyncStream<Void>
  private let reader = Mutex<Task<Void, Never>?>(nil)

  init(channel: L2CAPChannel, watch: ProgressWatch) {
    self.watch = watch
    (doorbell, bell) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    let task = Task { [self] in await self.read(channel) }
    reader.withLock { $0 = task }
  }

  /// Bytes the receiver has confirmed.
  var confirmed: Int { state.withLock { $0.confirmed } }

  /// The sender handed `count` bytes in all to the kernel.
  func sent(_ count: Int) {
    let done = state.withLock { state in
      state.sent = count
      return state.sent + state.confirmed
    }
    watch.progressed(to: done)
  }

  private func read(_ channel: L2CAPChannel) async {
    do {
      for try await sdu in channel.incoming {
        let (isAnswer, done) = state.withLock { state in
          if let window = L2CAPMessageWindow(bytes: sdu) {
            state.confirmed = max(state.confirmed, window.received)
            return (false, state.sent + state.confirmed)
          }
          state.answer = sdu
          return (true, state.sent + state.confirmed)
        }
        watch.progressed(to: done)
        bell.yield()
        if isAnswer { return }
      }
      state.withLock {
        $0.end = BluetoothError.notAcknowledged(
          "the channel closed before the receiver answered")
      }
    } catch {
      state.withLock { $0.end = error }
    }
    bell.yield()
  }

  func stop() {
    reader.withLock { $0?.cancel() }
    bell.finish()
  }

  /// Returns once fewer than ``L2CAPMessageWindow/size`` of the `sent` bytes are unconfirmed.
  func waitForRoom(sent: Int, bell: inout AsyncStream<Void>.Iterator) async throws {
    try await wait(bell: &bell) { state in
      guard state.answer == nil else {
        throw BluetoothError.notAcknowledged("it answered before the message was complete")
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

  /// Waits until `ready` says so (it throws to give up); throws the channel's end (the watch
  /// closes the channel when a limit passes).
  private func wait(
    bell: inout AsyncStream<Void>.Iterator, until ready: (State) throws -> Bool
  ) async throws {
    while true {
      let current = state.withLock { $0 }
      if try ready(current) { return }
      if let end = current.end { throw end }
      guard await bell.next() != nil else { throw CancellationError() }
    }
  }
}
