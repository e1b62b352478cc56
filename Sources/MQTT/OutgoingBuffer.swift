// OutgoingBuffer: messages waiting for the broker, at most `capacity`; the oldest is dropped
// (and counted) to make room, so a long broker outage costs bounded memory.

/// A bounded first-in first-out queue of messages not yet handed to the broker connection.
///
/// When full, appending drops the oldest message: a gateway's newest sightings are worth more
/// than its oldest. Every drop is counted in ``dropped``.
public struct OutgoingBuffer: Sendable {
  /// The most messages held.
  public let capacity: Int
  /// Messages dropped to make room, since the buffer was made.
  public private(set) var dropped = 0
  private var items: [MQTTMessage] = []
  private var head = 0

  /// Creates an empty buffer for at most `capacity` messages (at least 1).
  public init(capacity: Int) {
    self.capacity = Swift.max(1, capacity)
  }

  /// Messages waiting.
  public var count: Int { items.count - head }

  /// Whether nothing is waiting.
  public var isEmpty: Bool { count == 0 }

  /// Appends a message; returns `false` when the oldest was dropped to make room.
  @discardableResult
  public mutating func append(_ message: MQTTMessage) -> Bool {
    var kept = true
    if count == capacity {
      head += 1
      dropped += 1
      kept = false
    }
    items.append(message)
    compactIfNeeded()
    return kept
  }

  /// Puts a message back at the front (one taken out that could not be handed over); drops
  /// the newest message, counted, if the buffer is already full.
  public mutating func pushFront(_ message: MQTTMessage) {
    if count == capacity {
      items.removeLast()
      dropped += 1
    }
    if head > 0 {
      head -= 1
      items[head] = message
    } else {
      items.insert(message, at: 0)
    }
  }

  /// Removes and returns the oldest message.
  public mutating func popFirst() -> MQTTMessage? {
    guard head < items.count else { return nil }
    let message = items[head]
    head += 1
    compactIfNeeded()
    return message
  }

  /// Drops the consumed front once it is half the storage, so memory stays within 2x capacity.
  private mutating func compactIfNeeded() {
    if head == items.count {
      items.removeAll(keepingCapacity: true)
      head = 0
    } else if head > 64 && head * 2 > items.count {
      items.removeFirst(head)
      head = 0
    }
  }
}
