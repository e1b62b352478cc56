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

  @Test func aLineIsReadWithoutWhatFollowsIt() async throws {
    let (input, writer) = try Self.pipe()
    defer { close(input) }
    Self.send("yes\n123456\npartial", to: writer)
    #expect(await readLine(from: input) == "yes")
    #expect(await readLine(from: input) == "123456")
    close(writer)
    #expect(await readLine(from: input) == "partial")
    #expect(await readLine(from: input) == nil)
  }

  @Test func aLineTypedLaterIsWaitedFor() async throws {
    let (input, writer) = try Self.pipe()
    defer {
      close(input)
      close(writer)
    }
    let reading = Task { await readLine(from: input) }
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
    try await Task.sleep(for: .milliseconds(300))
    let start = ContinuousClock.now
    reading.cancel()
    #expect(await reading.value == nil)
    let took = ContinuousClock.now - start
    #expect(took < .milliseconds(100), "took \(took)")
    // Nothing is left waiting that could take the next answer's first byte.
    Self.send("n\n", to: writer)
    #expect(await readLine(from: input) == "n")
  }
}
