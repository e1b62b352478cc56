// Bytes a peer sends, on their way to standard output: serve's `"writes": "stdout"` and the
// L2CAP bridge (`l2cap connect/listen`). On a terminal (a pseudo-terminal here) nothing a peer
// sends may reach it raw: no OSC title, no clear-screen, no bidi override, no lone CSI byte; on
// a pipe the bytes arrive exactly as sent.
import TestSupport
import Testing

@testable import BLEKit
@testable import blekit

#if canImport(Glibc)
  import Glibc
#endif

/// Standard output (file descriptor 1) pointed at a pseudo-terminal or a pipe while a test
/// writes, and what arrived there. The suites that use it run one test at a time, and nothing
/// else in this test target writes to standard output.
enum CapturedOutput {
  enum Kind { case terminal, pipe }

  static func capture(on kind: Kind, _ body: () async throws -> Void) async throws -> [UInt8] {
    let reader: Int32
    let writer: Int32
    switch kind {
    case .terminal:
      var pair: (Int32, Int32) = (-1, -1)
      try #require(openpty(&pair.0, &pair.1, nil, nil, nil) == 0)
      (reader, writer) = pair
      // Raw: the line discipline passes bytes as written (no newline turned into CR LF).
      var settings = termios()
      try #require(tcgetattr(writer, &settings) == 0)
      cfmakeraw(&settings)
      try #require(tcsetattr(writer, TCSANOW, &settings) == 0)
    case .pipe:
      var fds: [Int32] = [-1, -1]
      try #require(pipe(&fds) == 0)
      (reader, writer) = (fds[0], fds[1])
    }
    defer { close(reader) }
    #expect((isatty(writer) == 1) == (kind == .terminal))
    let saved = dup(STDOUT_FILENO)
    try #require(saved >= 0)
    try #require(dup2(writer, STDOUT_FILENO) == STDOUT_FILENO)
    do {
      try await body()
    } catch {
      dup2(saved, STDOUT_FILENO)
      close(saved)
      close(writer)
      throw error
    }
    dup2(saved, STDOUT_FILENO)
    close(saved)
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    if kind == .pipe {
      close(writer)
      while true {
        let count = read(reader, &buffer, buffer.count)
        guard count > 0 else { break }
        received += buffer[..<count]
      }
    } else {
      // A pseudo-terminal hands bytes to its other side from a kernel work queue: read until
      // nothing more comes for 300 ms.
      var poller = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
      while poll(&poller, 1, 300) > 0 {
        let count = read(reader, &buffer, buffer.count)
        guard count > 0 else { break }
        received += buffer[..<count]
      }
      close(writer)
    }
    return received
  }

  /// What a peer may send to take over a terminal, each as its own value: an OSC title ended by
  /// BEL, a clear-screen, a right-to-left override, a lone CSI byte (C1, not UTF-8), a C1 CSI as
  /// UTF-8, a newline that forges a line of blekit's own, DEL, and plain text after them.
  static let hostile: [[UInt8]] = [
    Array("\u{1B}]0;title\u{07}".utf8),
    Array("\u{1B}[2J\u{1B}[H".utf8),
    Array("price \u{202E}0.01".utf8),
    [0x9B, 0x32, 0x4A],
    Array("\u{9B}2J".utf8),
    Array("ok\nblekit: fake line\r".utf8),
    [0x7F, 0x41],
    Array("caf\u{E9} \\ done".utf8),
  ]

  /// Whether `bytes` hold a terminal control: a C0 control other than newline and tab, DEL, a
  /// C1 control (as a byte or as UTF-8), or a bidi override or isolate.
  static func controls(in bytes: [UInt8]) -> [String] {
    var found: [String] = []
    for byte in bytes where (byte < 0x20 && byte != 0x0A && byte != 0x09) || byte == 0x7F {
      found.append("byte \(byte)")
    }
    if String(validating: bytes, as: UTF8.self) == nil { found.append("bytes that are not UTF-8") }
    for scalar in String(decoding: bytes, as: UTF8.self).unicodeScalars
    where (0x80...0x9F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value)
      || (0x2066...0x2069).contains(scalar.value)
    {
      found.append("U+\(String(scalar.value, radix: 16))")
    }
    return found
  }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct PeerBytesOnTerminalTests {
  static let uart = BluetoothUUID(rawValue: "6e400002-b5a3-f393-e0a9-e50e24dcca9e")!

  func serveWrites(_ values: [[UInt8]]) {
    let output = ServeOutput(json: false, hex: false)
    for value in values {
      let request = ATTWriteRequest(
        characteristic: Self.uart, central: nil, value: value, offset: 0, withoutResponse: true,
        mtu: nil)
      output.write(request, service: Self.uart, to: .stdout)
    }
  }

  @Test func serveShowsACentralsWritesToATerminalEscaped() async throws {
    let shown = try await CapturedOutput.capture(on: .terminal) {
      serveWrites(CapturedOutput.hostile)
    }
    #expect(CapturedOutput.controls(in: shown) == [])
    #expect(shown == CapturedOutput.hostile.flatMap { TerminalText.show($0) })
    let text = String(decoding: shown, as: UTF8.self)
    #expect(text.contains(#"\x1b]0;title\x07"#))
    #expect(text.contains(#"price \u{202e}0.01"#))
  }

  /// `read --raw` and `notify --raw`: exact bytes on a pipe, never a peer's controls on a
  /// terminal.
  @Test func rawValuesReachATerminalEscapedAndAPipeExactly() async throws {
    let shown = try await CapturedOutput.capture(on: .terminal) {
      for value in CapturedOutput.hostile { writeStandardOutput(ValueFormat.raw.render(value)) }
    }
    #expect(CapturedOutput.controls(in: shown) == [])
    let written = try await CapturedOutput.capture(on: .pipe) {
      for value in CapturedOutput.hostile { writeStandardOutput(ValueFormat.raw.render(value)) }
    }
    #expect(written == CapturedOutput.hostile.flatMap { $0 })
  }

  @Test func serveWritesACentralsBytesToAPipeExactly() async throws {
    let written = try await CapturedOutput.capture(on: .pipe) {
      serveWrites(CapturedOutput.hostile)
    }
    #expect(written == CapturedOutput.hostile.flatMap { $0 })
  }

  /// The bridge's receiving side over a Unix socket pair standing in for the L2CAP socket: the
  /// peer sends `sdus` and closes.
  func bridge(_ sdus: [[UInt8]]) async throws {
    let (fd, peer) = try seqpacketPair()
    let channel = L2CAPChannel(seqpacket: fd, sendMTU: 4096, receiveMTU: 4096)
    for sdu in sdus {
      #expect(sdu.withUnsafeBytes { send(peer, $0.baseAddress, $0.count, 0) } == sdu.count)
    }
    close(peer)
    try await pipeStandardStreams(channel, receiveOnly: true)
  }

  @Test func theL2CAPBridgeShowsAPeersBytesToATerminalEscaped() async throws {
    let shown = try await CapturedOutput.capture(on: .terminal) {
      try await bridge(CapturedOutput.hostile)
    }
    #expect(CapturedOutput.controls(in: shown) == [])
    #expect(shown == CapturedOutput.hostile.flatMap { TerminalText.show($0) })
  }

  @Test func theL2CAPBridgeWritesAPeersBytesToAPipeExactly() async throws {
    let written = try await CapturedOutput.capture(on: .pipe) {
      try await bridge(CapturedOutput.hostile)
    }
    #expect(written == CapturedOutput.hostile.flatMap { $0 })
  }
}
