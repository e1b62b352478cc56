// ReceiveQueue: received messages waiting for their reader, bounded by count and by bytes
// (the oldest dropped beyond either), behind ``MQTTClient/messages``.

import Synchronization

/// A single-reader queue of received messages. libmosquitto's thread pushes; the reader
/// awaits ``next()``. Unlike an `AsyncStream` buffer it knows when the reader took a message,
/// so it can bound the bytes waiting, not only their number.
final class ReceiveQueue: Sendable {
  private struct State {
    var items: [MQTTMessage] = []
    var head = 0
    var bytes = 0
    var waiter: CheckedContinuation<MQTTMessage?, Never>?
    var finished = false

    mutating func popFirst() -> MQTTMessage? {
      guard head < items.count else { return nil }
      let item = items[head]
      head += 1
      bytes -= ReceiveQueue.cost(item)
      if head > 64 && head * 2 > items.count {
        items.removeFirst(head)
        head = 0
      }
      return item
    }

    var count: Int { items.count - head }
  }

  private let state = Mutex(State())
  private let capacity: Int
  private let byteCapacity: Int

  /// At most `capacity` messages and `byteCapacity` bytes (``cost(_:)``) wait; beyond, the
  /// oldest are dropped (the newest message is always kept).
  init(capacity: Int, byteCapacity: Int) {
    self.capacity = Swift.max(1, capacity)
    self.byteCapacity = Swift.max(1, byteCapacity)
  }

  /// What a waiting message counts for: its payload and topic and 64 bytes for the rest.
  static func cost(_ message: MQTTMessage) -> Int {
    message.payload.count + message.topic.utf8.count + 64
  }

  /// Adds a message (ignored once finished); returns how many older messages were dropped.
  func push(_ message: MQTTMessage) -> Int {
    let (waiter, dropped) = state.withLock {
      state -> (CheckedContinuation<MQTTMessage?, Never>?, Int) in
      guard !state.finished else { return (nil, 0) }
      if let waiter = state.waiter {
        state.waiter = nil
        return (waiter, 0)
      }
      state.items.append(message)
      state.bytes += Self.cost(message)
      var dropped = 0
      while state.count > 1 && (state.count > capacity || state.bytes > byteCapacity) {
        _ = state.popFirst()
        dropped += 1
      }
      return (nil, dropped)
    }
    waiter?.resume(returning: message)
    return dropped
  }

  /// Messages waiting for the reader.
  var waiting: Int { state.withLock { $0.count } }

  /// No more messages: the reader gets what waits, then `nil`.
  func finish() {
    let waiter = state.withLock { state in
      state.finished = true
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: nil)
  }

  /// The next message; `nil` once finished and empty, or when the reading task is cancelled.
  func next() async -> MQTTMessage? {
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let ready = state.withLock { state -> MQTTMessage?? in
          if let item = state.popFirst() { return .some(item) }
          if state.finished || Task.isCancelled { return .some(nil) }
          state.waiter = continuation
          return nil
        }
        if let ready { continuation.resume(returning: ready) }
      }
    } onCancel: {
      let waiter = state.withLock { state in
        defer { state.waiter = nil }
        return state.waiter
      }
      waiter?.resume(returning: nil)
    }
  }
}
