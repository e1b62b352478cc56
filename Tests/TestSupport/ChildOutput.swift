// Pipes to and from the tests' child processes that no other child inherits, and a run of a
// child with its output captured.

import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A pipe whose two ends are close-on-exec from their creation: a connected stream socket
/// pair made with `SOCK_CLOEXEC` (Glibc's Swift module does not declare `pipe2`), which the
/// child reads or writes as it would a pipe.
///
/// Foundation's `Pipe` is not: a child that another test starts meanwhile (the tests run in
/// parallel, and Foundation's `Process` closes no descriptors in the child) inherits its ends,
/// and a reader waiting for end-of-file waits for as long as that child lives. Seen on
/// 2026-12-05: a bash completion test read its bash's output to the end while a MQTT test's
/// mosquitto broker held the pipe's write end; with the cooperative pool's other thread also
/// blocked, `swift test` stopped making progress until its 20-minute limit. Give the child the
/// end it needs (dup2 into its standard descriptors clears close-on-exec there only) and close
/// that end here once the child has started.
public struct ChildPipe: Sendable {
  public let reading: FileHandle
  public let writing: FileHandle

  public init() throws {
    var fds: [Int32] = [-1, -1]
    let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    guard socketpair(AF_UNIX, kind, 0, &fds) == 0 else {
      throw CocoaError(
        .fileWriteUnknown,
        userInfo: [NSLocalizedDescriptionKey: "socketpair: \(String(cString: strerror(errno)))"])
    }
    reading = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true)
    writing = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
  }
}

/// What a child wrote and how it ended.
public struct CapturedRun: Sendable {
  public var status: Int32
  public var out: Data
  public var err: Data
  /// Whether the child was killed at the time limit.
  public var killed = false

  public var output: String { String(decoding: out, as: UTF8.self) }
  public var error: String { String(decoding: err, as: UTF8.self) }
}

/// Runs `process` (configured, not started) with its standard output and error captured and
/// its standard input from `input` (else /dev/null), and waits for it; past `limit` seconds
/// the child is killed. Both outputs are read at once, on threads of their own, so a child
/// that fills one pipe while the other is waited on cannot stall. Blocks the calling thread:
/// from async code, call it off the cooperative pool.
public func runCapturing(_ process: Process, input: Data? = nil, limit: Double? = nil) throws
  -> CapturedRun
{
  let out = try ChildPipe()
  let err = try ChildPipe()
  let stdin = try input.map { _ in try ChildPipe() }
  process.standardOutput = out.writing
  process.standardError = err.writing
  process.standardInput = stdin?.reading ?? FileHandle.nullDevice
  try process.run()
  try out.writing.close()
  try err.writing.close()
  try stdin?.reading.close()
  let outData = ReadToEnd(out.reading)
  let errData = ReadToEnd(err.reading)
  if let input, let stdin {
    stdin.writing.write(input)
    try? stdin.writing.close()
  }
  var killed = false
  if let limit {
    let deadline = Date().addingTimeInterval(limit)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    if process.isRunning {
      kill(process.processIdentifier, SIGKILL)
      killed = true
    }
  }
  waitForExit(process)
  return CapturedRun(
    status: process.terminationStatus, out: outData.wait(), err: errData.wait(), killed: killed)
}

/// Reads a pipe to its end on a thread of its own.
private final class ReadToEnd: Sendable {
  private let data = Mutex(Data())
  private let done = DispatchSemaphore(value: 0)

  init(_ handle: FileHandle) {
    Thread { [self] in
      let bytes = handle.readDataToEndOfFile()
      data.withLock { $0 = bytes }
      try? handle.close()
      done.signal()
    }.start()
  }

  func wait() -> Data {
    done.wait()
    return data.withLock { $0 }
  }
}

/// Waits for `process` to exit without Foundation's `waitUntilExit()`, which runs the calling
/// thread's run loop: on a thread of Swift's cooperative pool that was seen to deadlock
/// (`_CFRunLoopFinished` waiting on a mutex forever, the child already a zombie) and with the
/// pool's threads blocked, the whole test run stopped. Foundation reaps the child on a thread
/// of its own and clears `isRunning`; this only looks.
public func waitForExit(_ process: Process) {
  while process.isRunning { usleep(10_000) }
}
