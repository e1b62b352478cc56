// Waiting for something with a timeout: the first element of a stream that answers a question.

/// Waits at most `limit` for the first element of `stream` that `match` maps to a value.
///
/// - Returns: that value, or nil when the stream ends, the time runs out or the calling task
///   is cancelled first.
func firstMatch<Element: Sendable, Value: Sendable>(
  in stream: AsyncStream<Element>, within limit: Duration,
  _ match: @escaping @Sendable (Element) -> Value?
) async -> Value? {
  let waiter = Task { () -> Value? in
    for await element in stream {
      if let value = match(element) { return value }
    }
    return nil
  }
  let timer = Task {
    try? await Task.sleep(for: limit)
    waiter.cancel()
  }
  defer { timer.cancel() }
  return await withTaskCancellationHandler {
    await waiter.value
  } onCancel: {
    waiter.cancel()
  }
}
