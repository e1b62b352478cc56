// The progress line of a long transfer on standard error (advertise, receive, L2CAP).

import Synchronization

/// "sent/received N/M bytes (P%), R kB/s" on standard error, only on a terminal, once a
/// transfer has run a second; redrawn at most 10 times a second.
final class ProgressLine: Sendable {
  private struct State {
    var start = ContinuousClock.now
    var lastDraw: ContinuousClock.Instant?
    var drawn = false
  }
  private let verb: String
  private let enabled: Bool
  private let state = Mutex(State())

  init(verb: String, enabled: Bool = standardErrorIsTerminal) {
    self.verb = verb
    self.enabled = enabled
  }

  func update(_ done: Int, of total: Int?) {
    guard enabled else { return }
    let line: String? = state.withLock { state in
      let now = ContinuousClock.now
      let elapsed = now - state.start
      guard elapsed >= .seconds(1) else { return nil }
      if let last = state.lastDraw, now - last < .milliseconds(100) { return nil }
      state.lastDraw = now
      state.drawn = true
      let rate = Double(done) / seconds(elapsed) / 1000
      let rateText = String((rate * 10).rounded() / 10)
      if let total, total > 0 {
        return "\r\u{1B}[K\(verb) \(done)/\(total) bytes (\(done * 100 / total)%), \(rateText) kB/s"
      }
      return "\r\u{1B}[K\(verb) \(done) bytes, \(rateText) kB/s"
    }
    if let line { writeStandardError(line) }
  }

  /// Starts timing again, for the next transfer on the same line.
  func restart() {
    state.withLock { state in
      state.start = ContinuousClock.now
      state.lastDraw = nil
    }
  }

  func finish() {
    let drawn = state.withLock { state in
      defer { state.drawn = false }
      return state.drawn
    }
    if drawn { writeStandardError("\r\u{1B}[K") }
  }
}
