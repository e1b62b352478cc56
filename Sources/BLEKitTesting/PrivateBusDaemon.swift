// The private message bus a simulation runs on: Debian's dbus-daemon with a config of its own in
// a temporary directory, killed when the simulation closes or the process exits.
import DBus
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One dbus-daemon listening on a socket in a temporary directory.
final class PrivateBusDaemon: Sendable {
  /// The address clients connect to (`unix:path=...`).
  let address: String
  private let directory: URL
  private let pid: pid_t

  /// Starts `/usr/bin/dbus-daemon` and waits until it accepts a connection.
  init() async throws(SimulationError) {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("blekit-simulated-\(UUID().uuidString.prefix(8))")
    let socket = directory.appendingPathComponent("bus").path
    let config = directory.appendingPathComponent("bus.conf")
    let process = Process()
    do {
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      try Self.config(socket: socket).write(to: config, atomically: true, encoding: .utf8)
      process.executableURL = URL(fileURLWithPath: Self.executable)
      process.arguments = ["--config-file=\(config.path)", "--nofork"]
      // Nothing inherited: a daemon holding the runner's output would keep `swift test` waiting.
      process.standardOutput = FileHandle.nullDevice
      process.standardError = FileHandle.nullDevice
      process.standardInput = FileHandle.nullDevice
      try process.run()
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw SimulationError(
        "cannot start \(Self.executable) (Debian's dbus-daemon package): \(error)")
    }
    let pid = process.processIdentifier
    _ = Self.running.withLock { $0.insert(pid) }
    Self.installExitHandler
    self.address = "unix:path=\(socket)"
    self.directory = directory
    self.pid = pid
    // The daemon listens within milliseconds of starting; 10 s covers a loaded machine.
    let deadline = ContinuousClock.now + .seconds(10)
    while true {
      if let probe = try? DBusConnection(address: address) {
        probe.close()
        return
      }
      guard ContinuousClock.now < deadline, process.isRunning else {
        stop()
        throw SimulationError("dbus-daemon did not start listening at \(socket)")
      }
      try? await Task.sleep(for: .milliseconds(5))
    }
  }

  /// Kills the daemon and removes its directory; idempotent.
  func stop() {
    let wasRunning = Self.running.withLock { $0.remove(pid) != nil }
    if wasRunning { Syscall.kill(pid, SIGKILL) }
    try? FileManager.default.removeItem(at: directory)
  }

  deinit { stop() }

  static let executable = "/usr/bin/dbus-daemon"

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
        <allow own="*"/>
      </policy>
    </busconfig>
    """
  }

  /// Daemons started and not yet stopped, killed at exit.
  static let running = Mutex<Set<pid_t>>([])
  static let installExitHandler: Void = {
    atexit {
      for pid in PrivateBusDaemon.running.withLock({ $0 }) { Syscall.kill(pid, SIGKILL) }
    }
  }()
}
