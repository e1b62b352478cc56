// A private dbus-daemon for the central-side tests (BlueZObjectTreeTests).
import DBus
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A private message bus for one test; `stop()` ends the daemon and removes its directory.
final class ClientTestBus: Sendable {
  let address: String
  private let directory: URL
  private let process: Process

  init() throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("blekit-central-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let config = """
      <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
       "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
      <busconfig>
        <type>session</type>
        <listen>unix:path=\(directory.path)/bus</listen>
        <auth>EXTERNAL</auth>
        <policy context="default">
          <allow send_destination="*" eavesdrop="true"/>
          <allow receive_sender="*"/>
          <allow eavesdrop="true"/>
          <allow own="*"/>
        </policy>
      </busconfig>
      """
    let configURL = directory.appendingPathComponent("bus.conf")
    try config.write(to: configURL, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
    process.arguments = ["--config-file=\(configURL.path)", "--nofork", "--print-address=1"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    // The daemon prints its address once it listens.
    var line = Data()
    while true {
      let byte = output.fileHandleForReading.readData(ofLength: 1)
      if byte.isEmpty || byte == Data([0x0A]) { break }
      line.append(byte)
    }
    self.address = String(decoding: line, as: UTF8.self)
    self.directory = directory
    self.process = process
  }

  /// A new client connection to this bus.
  func connect() throws -> DBusConnection { try DBusConnection(address: address) }

  /// Ends the daemon. Foundation's `waitUntilExit()` can hang when called from a task here, so
  /// this signals the daemon and polls briefly instead.
  func stop() {
    let pid = process.processIdentifier
    if pid > 0 { kill(pid, SIGTERM) }
    for _ in 0..<20 where process.isRunning { usleep(10_000) }
    try? FileManager.default.removeItem(at: directory)
  }
}
