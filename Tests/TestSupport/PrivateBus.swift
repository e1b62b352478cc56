// A private dbus-daemon for tests: its own config in a temporary directory, stopped afterwards,
// and never outliving the test process.
import DBus
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A private message bus for one test (or one suite).
///
/// The daemon writes nothing to the test runner's output (a daemon that inherited it would keep
/// `swift test` waiting for end-of-file after the tests end), and every daemon still running
/// when the test process exits is killed then.
public final class PrivateBus: Sendable {
  /// The address clients connect to (`unix:path=...,guid=...`).
  public let address: String
  /// The temporary directory holding the config and the socket.
  public let directory: URL
  private let pid: pid_t

  /// Starts a daemon and waits until it listens.
  /// - Parameter name: a short word for the temporary directory's name.
  public init(name: String = "bus") throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("blekit-test-\(name)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let configURL = directory.appendingPathComponent("bus.conf")
    try Self.config(socket: directory.appendingPathComponent("bus").path)
      .write(to: configURL, atomically: true, encoding: .utf8)

    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
    process.arguments = ["--config-file=\(configURL.path)", "--nofork", "--print-address=1"]
    // Close-on-exec: no other child keeps the pipe open (ChildPipe).
    let output = try ChildPipe()
    process.standardOutput = output.writing
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try process.run()
    try? output.writing.close()
    _ = Self.running.withLock { $0.insert(process.processIdentifier) }
    Self.installExitHandler

    // The daemon prints its address once it listens, then nothing more.
    var line = Data()
    while true {
      let byte = output.reading.readData(ofLength: 1)
      if byte.isEmpty || byte == Data([0x0A]) { break }
      line.append(byte)
    }
    try? output.reading.close()
    self.address = String(decoding: line, as: UTF8.self)
    self.directory = directory
    self.pid = process.processIdentifier
    guard !address.isEmpty else {
      stop()
      throw CocoaError(
        .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "dbus-daemon did not start"])
    }
  }

  /// A new client connection to this bus.
  public func connect() throws -> DBusConnection { try DBusConnection(address: address) }

  /// Kills the daemon and removes its directory. Idempotent.
  ///
  /// SIGKILL, and no waiting: the daemon can inherit a blocked SIGTERM from the runner's
  /// threads, and Foundation's `waitUntilExit()` can hang on a cooperative thread; Foundation
  /// reaps the child by itself.
  public func stop() {
    let wasRunning = Self.running.withLock { $0.remove(pid) != nil }
    if wasRunning { kill(pid, SIGKILL) }
    try? FileManager.default.removeItem(at: directory)
  }

  deinit { stop() }

  static func config(socket: String) -> String {
    """
    <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
    <busconfig>
      <type>session</type>
      <listen>unix:path=\(socket)</listen>
      <auth>EXTERNAL</auth>
      <policy context="default">
        <allow send_destination="*" eavesdrop="true"/>
        <allow receive_sender="*"/>
        <allow eavesdrop="true"/>
        <allow own="*"/>
      </policy>
    </busconfig>
    """
  }

  /// Daemons started and not yet stopped, killed at exit.
  static let running = Mutex<Set<pid_t>>([])
  static let installExitHandler: Void = {
    atexit {
      for pid in PrivateBus.running.withLock({ $0 }) { kill(pid, SIGKILL) }
    }
  }()
}

/// Runs `body` with a fresh private bus, stopping it afterwards.
public func withPrivateBus<T>(
  name: String = "bus", _ body: (PrivateBus) async throws -> T
) async throws -> T {
  let bus = try PrivateBus(name: name)
  defer { bus.stop() }
  return try await body(bus)
}
