// Waiting for something with an upper bound, so that a test of "ends within N seconds" fails
// (rather than hangs) when it does not end.

/// The outcome of ``within(_:_:)``.
public enum Bounded<Value: Sendable>: Sendable {
  /// `body` finished in time with this value.
  case finished(Value)
  /// `limit` passed first (and `body` was cancelled).
  case timedOut

  /// The value, or nil when the limit passed first.
  public var value: Value? {
    if case .finished(let value) = self { return value }
    return nil
  }
}

/// Runs `body` and waits at most `limit` for it; `body` is cancelled when the limit passes (it
/// must end on cancellation, as iterating a stream does).
public func within<Value: Sendable>(
  _ limit: Duration, _ body: @escaping @Sendable () async -> Value
) async -> Bounded<Value> {
  await withTaskGroup(of: Bounded<Value>.self) { group in
    group.addTask { .finished(await body()) }
    group.addTask {
      try? await Task.sleep(for: limit)
      return .timedOut
    }
    let first = await group.next() ?? .timedOut
    group.cancelAll()
    return first
  }
}

/// Waits at most `limit` for `task`, and cancels it when the limit passes.
public func within<Value: Sendable>(_ limit: Duration, _ task: Task<Value, Never>) async
  -> Bounded<Value>
{
  await within(limit) {
    await withTaskCancellationHandler {
      await task.value
    } onCancel: {
      task.cancel()
    }
  }
}

/// Polls `condition` for up to five seconds.
public func eventually(_ condition: () -> Bool) async -> Bool {
  for _ in 0..<250 {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(20))
  }
  return condition()
}
