// A TCP port forward in front of a test broker, made as qemu's guestfwd `cmd:` makes one: a
// process per connection that is accepted first and then connects onwards, and whose error
// text goes to the client when the broker is down.

import Foundation

/// `socat` listening on a free loopback port and forwarding each connection to `target` through
/// a second socat. While nothing listens at the target, a connection is accepted, gets that
/// socat's error line ("... E connect(...): Connection refused"), which is not MQTT, and is
/// closed.
final class PortForward: @unchecked Sendable {
  let port: Int
  private let process = Process()

  init(to target: Int) throws {
    port = try MosquittoBroker.freePort()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/socat")
    process.arguments = [
      "TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork",
      "EXEC:socat - TCP\\:127.0.0.1\\:\(target),stderr",
    ]
    process.standardError = FileHandle.nullDevice
    try process.run()
    // Listening within 5 s, or the test fails here.
    for _ in 0..<250 {
      if Self.accepts(port) { return }
      usleep(20_000)
    }
    stop()
    throw CocoaError(
      .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "socat did not listen"])
  }

  /// Whether something accepts TCP connections on the loopback port.
  private static func accepts(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
  }

  /// SIGKILL: the test process blocks SIGTERM in its threads, and its children inherit that.
  func stop() {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
  }
}
