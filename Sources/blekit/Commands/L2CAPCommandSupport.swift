// Shared by the L2CAP commands (l2cap listen/connect, advertise --l2cap, receive --l2cap):
// standard input as chunks, a progress line, and the pipe between standard input/output and
// a channel.

import ArgumentParsing
import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

/// Parses `--psm`: an LE PSM, 1-255 (decimal or 0x..).
func parsePSM(_ value: UInt16?) throws(UsageError) -> L2CAPPSM? {
  guard let value else { return nil }
  guard let psm = L2CAPPSM(rawValue: value) else {
    throw .invalid("--psm \(value): an LE PSM is 1-255 (dynamic ones 128-255)")
  }
  return psm
}

/// Standard input in chunks, read one chunk ahead of the consumer: while the channel is
/// slower, reading stops (back-pressure to the writer of the pipe). Standard input may be a
/// file, a terminal or a pipe shared with other processes, so it is not made non-blocking (that
/// would change it for them): each read follows the reactor's word that it is readable (a
/// regular file, which epoll refuses, counts as always readable), so no thread waits on it.
struct StandardInputChunks: AsyncSequence, Sendable {
  typealias Element = [UInt8]
  let chunkSize: Int

  init(chunkSize: Int = 65536) {
    self.chunkSize = chunkSize
  }

  func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(chunkSize: chunkSize)
  }

  struct AsyncIterator: AsyncIteratorProtocol {
    let chunkSize: Int
    /// The read of the next chunk, started when the previous one was handed over.
    var ahead: Task<[UInt8]?, any Error>?

    init(chunkSize: Int) {
      self.chunkSize = chunkSize
    }

    mutating func next() async throws -> [UInt8]? {
      let current = ahead ?? Self.read(chunkSize)
      ahead = nil
      guard let chunk = try await current.value else { return nil }
      ahead = Self.read(chunkSize)
      return chunk
    }

    /// One `read(2)` of standard input, after BLEKit's reactor has seen it readable (standard
    /// input is shared with the shell, so it stays blocking: a read follows a readiness; a
    /// regular file, which epoll does not take, is always ready): a chunk, nil at the end. No
    /// thread is held while standard input is idle, and cancelling the task ends the wait.
    static func read(_ size: Int) -> Task<[UInt8]?, any Error> {
      Task {
        var buffer = [UInt8](repeating: 0, count: size)
        while true {
          let wake = try await Reactor.shared.wait(STDIN_FILENO, for: .readable)
          guard wake == .ready else {
            throw CLIError(.failure, "cannot read standard input: it was closed while waited for")
          }
          let count = buffer.withUnsafeMutableBytes {
            Syscall.read(STDIN_FILENO, $0.baseAddress, $0.count)
          }
          if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
          if count < 0 {
            throw CLIError(
              .failure, "cannot read standard input: \(String(cString: strerror(errno)))")
          }
          return count == 0 ? nil : Array(buffer[..<count])
        }
      }
    }
  }
}

/// Pipes standard input to `channel` and the channel to standard output until either ends
/// (each SDU exact on a pipe or a file; on a terminal escaped and ending a line, see
/// ``StandardOutput/writePeerBytes(_:)``):
/// standard input's end sends what is left, waits until the kernel sent it
/// (``L2CAPChannel/drain(timeout:)``), and closes the channel (L2CAP has no half-close); the
/// peer closing ends the pipe after everything it sent was written out. With `receiveOnly`
/// standard input is not read and only the peer's close ends the pipe.
///
/// - Throws: the link's error (lost link: exit 7), a failed output (exit 13), exit 7 when the
///   channel ended (the peer closed it, or the link was lost) while a chunk of standard input
///   was still on its way (a peer that closes while standard input is idle is a normal end).
func pipeStandardStreams(
  _ channel: L2CAPChannel, receiveOnly: Bool, drainLimit: Duration = .seconds(60)
) async throws {
  let received = ProgressLine(verb: "received")
  enum Side: Sendable {
    case inputEnded
    case peerEnded
  }
  let result = await withTaskGroup(of: Result<Side, any Error>.self) {
    group -> Result<Side, any Error> in
    group.addTask {
      do {
        var total = 0
        for try await sdu in channel.incoming {
          try StandardOutput.writePeerBytes(sdu)
          total += sdu.count
          received.update(total, of: nil)
        }
        received.finish()
        return .success(.peerEnded)
      } catch {
        received.finish()
        return .failure(error)
      }
    }
    if !receiveOnly {
      group.addTask {
        do {
          for try await chunk in StandardInputChunks() {
            try await channel.write(chunk)
          }
          guard await channel.drain(timeout: drainLimit) else {
            if channel.isClosed {
              return .failure(
                CLIError(
                  .disconnected,
                  "the channel ended before the kernel had sent all of standard input"))
            }
            return .failure(
              CLIError(
                .timedOut,
                "the peer took no data for \(drainLimit); unsent bytes were dropped"))
          }
          return .success(.inputEnded)
        } catch {
          return .failure(error)
        }
      }
    }
    let first = await group.next()!
    // The other side: stop it. Closing the channel ends its incoming SDUs.
    channel.close()
    group.cancelAll()
    let second = await group.next()
    // A send that failed because the channel was closed: the peer closed while standard
    // input still had bytes for it (whichever side noticed first). What the peer sent was all
    // written out, but not everything we had reached it.
    for side in [first, second] {
      if case .failure(let error as BluetoothError)? = side, error.code == .channelClosed {
        return .failure(
          CLIError(
            .disconnected, "the peer closed the channel before all of standard input was sent"))
      }
    }
    return first
  }
  // The kernel's receive queue came near full: the kernels named in L2CAPChannel's
  // documentation may then reorder SDUs or drop the last ones. The bytes are out; the status
  // says they may be wrong (with an error, the line says so too).
  let nearlyFull = channel.receiveQueueNearlyFull
  if case .failure(let error) = result {
    var failure = exitError(error)
    if nearlyFull > 0, var line = failure as? CLIError {
      line.exitMessage +=
        "; the kernel's receive queue had also been nearly full (\(nearlyFull) reads), so what "
        + "was printed may be out of order (docs/l2cap.md)"
      failure = line
    }
    throw failure
  }
  if nearlyFull > 0 {
    throw CLIError(
      .unverified,
      "the kernel's receive queue was nearly full (\(nearlyFull) reads); this kernel may "
        + "then reorder or drop SDUs, so the output is unverified (docs/l2cap.md)")
  }
}
