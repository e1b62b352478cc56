// The pairing prompt's line reader over a pipe: one line and no more, the end of input, and a
// cancellation (bluetoothd's Cancel, Ctrl-C) that ends a wait for a person at once.
import Testing

@testable import blekit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct PairingSupportTests {
  /// A pipe; the caller closes both ends.
  static func pipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    try #require(Glibc.pipe(&fds) == 0)
    return (fds[0], fds[1])
  }

  static func send(_ text: String, to fd: Int32) {
    let bytes = Array(text.utf8)
    #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
  }

  /// `readLine(from:)`, recording an issue and cancelling the read when it has not returned
  /// after `limit` (a reader that took too much would otherwise wait for more for ever).
  static func line(_ fd: Int32, within limit: Duration = .seconds(5)) async -> String? {
    enum Outcome: Sendable {
      case line(String?)
      case stillWaiting
    }
    return await withTaskGroup(of: Outcome.self) { group in
      group.addTask { .line(await readLine(from: fd)) }
      group.addTask {
        try? await Task.sleep(for: limit)
        return .stillWaiting
      }
      defer { group.cancelAll() }
      guard case .line(let line) = await group.next() else {
        Issue.record("still waiting for a line after \(limit)")
        return nil
      }
      return line
    }
  }

  @Test func aLineIsReadWithoutWhatFollowsIt() async throws {
    let (input, writer) = try Self.pipe()
    defer { close(input) }
    Self.send("yes\n123456\npartial", to: writer)
    #expect(await Self.line(input) == "yes")
    #expect(await Self.line(input) == "123456")
    close(writer)
    #expect(await Self.line(input) == "partial")
    #expect(await Self.line(input) == nil)
  }

  @Test func aLineTypedLaterIsWaitedFor() async throws {
    let (input, writer) = try Self.pipe()
    defer {
      close(input)
      close(writer)
    }
    let reading = Task { await Self.line(input) }
    try await Task.sleep(for: .milliseconds(300))
    Self.send("y\n", to: writer)
    #expect(await reading.value == "y")
  }

  @Test func aCancelledQuestionEndsItsWaitAtOnce() async throws {
    let (input, writer) = try Self.pipe()
    defer {
      close(input)
      close(writer)
    }
    let reading = Task { await readLine(from: input) }
    try await Task.sleep(for: .milliseconds(250))
    let start = ContinuousClock.now
    reading.cancel()
    // Should the cancellation not end the wait, a line 2 s later does (and the time fails).
    let late = Task {
      try await Task.sleep(for: .seconds(2))
      Self.send("late\n", to: writer)
    }
    let answer = await reading.value
    let took = ContinuousClock.now - start
    late.cancel()
    #expect(answer == nil)
    // Well before the late line: a full parallel `swift test` beside a lab VM took 0.32-0.35 s
    // here (the reactor's wake and the task's resumption on a busy pool), an idle run under 1 ms.
    #expect(took < .milliseconds(1500), "took \(took)")
    // Nothing is left waiting that could take the next answer's first byte.
    Self.send("n\n", to: writer)
    #expect(await Self.line(input) == "n")
  }
}
