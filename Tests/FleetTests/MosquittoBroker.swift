// A real mosquitto broker for one test: a loopback port, a temporary directory, stopped (and
// its directory removed) by the test.

import Foundation
import TestSupport

/// A mosquitto process on 127.0.0.1 with persistence in its own temporary directory; with
/// `tls`, its listener speaks TLS only, with a certificate for 127.0.0.1 signed by a CA made
/// for this broker (``certificateAuthority``).
final class MosquittoBroker: @unchecked Sendable {
  private(set) var port: Int
  let directory: URL
  let tls: Bool
  /// Lines added to the configuration.
  let extraConfiguration: String
  private var pid: pid_t?

  var url: String { "\(tls ? "mqtts" : "mqtt")://127.0.0.1:\(port)" }
  /// The PEM file of the CA that signed a TLS broker's certificate.
  var certificateAuthority: String { directory.appendingPathComponent("ca.pem").path }

  init(tls: Bool = false, extraConfiguration: String = "") throws {
    self.tls = tls
    self.extraConfiguration = extraConfiguration
    directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "blekit-mqtt-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    if tls { try Self.makeCertificates(in: directory) }
    // The port is chosen last, just before mosquitto binds it: between the probe and the bind,
    // a client socket of another test can take the same number as its ephemeral local port
    // (the certificates take seconds under load), and mosquitto then exits with "Address
    // already in use". A broker that exits before listening is tried on a fresh port.
    port = 0
    var failures: [String] = []
    for _ in 0..<3 {
      port = try Self.freePort()
      do {
        try start()
        return
      } catch let error as BrokerError where error.exited {
        failures.append(error.message)
      }
    }
    throw BrokerError(message: failures.joined(separator: "; "))
  }

  /// The configuration for the current port; mosquitto's log goes to `mosquitto.log` in the
  /// broker's directory, quoted when it fails to start.
  private func writeConfiguration() throws {
    var tlsLines = ""
    if tls {
      tlsLines = """
        cafile \(directory.path)/ca.pem
        certfile \(directory.path)/server.pem
        keyfile \(directory.path)/server.key

        """
    }
    let config = """
      listener \(port) 127.0.0.1
      \(tlsLines)allow_anonymous true
      persistence true
      persistence_location \(directory.path)/
      log_dest file \(logPath)
      log_type error
      log_type warning
      user \(NSUserName())
      \(extraConfiguration)

      """
    try config.write(
      to: directory.appendingPathComponent("mosquitto.conf"), atomically: true, encoding: .utf8)
  }

  private var logPath: String { directory.appendingPathComponent("mosquitto.log").path }

  /// Starts (or restarts) the broker and waits until it accepts connections.
  ///
  /// Spawned with posix_spawn and an empty signal mask: the test process blocks SIGTERM in
  /// its threads, and a child inheriting that mask would never stop on SIGTERM.
  func start() throws {
    try writeConfiguration()
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let arguments = [
      "/usr/sbin/mosquitto", "-c", directory.appendingPathComponent("mosquitto.conf").path,
    ]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var child = pid_t()
    let code = posix_spawn(&child, arguments[0], nil, &attributes, &argv, environ)
    guard code == 0 else { throw BrokerError(message: "cannot start mosquitto: \(code)") }
    pid = child
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
      if Self.accepts(port: port) { return }
      var status: Int32 = 0
      if waitpid(child, &status, WNOHANG) == child {
        pid = nil
        throw BrokerError(
          message: "mosquitto exited (status \(status)) before listening on \(port): \(logTail())",
          exited: true)
      }
      usleep(20_000)
    }
    stop()
    throw BrokerError(message: "mosquitto did not listen on \(port) within 10 s: \(logTail())")
  }

  /// The last lines of mosquitto's log, on one line.
  private func logTail() -> String {
    let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log)"
    return text.split(separator: "\n").suffix(3).joined(separator: " | ")
  }

  /// Stops the broker (SIGTERM: it saves its persistent sessions; SIGKILL after 5 s) and
  /// reaps it.
  func stop() {
    guard let pid else { return }
    self.pid = nil
    kill(pid, SIGTERM)
    var status: Int32 = 0
    for _ in 0..<250 {
      if waitpid(pid, &status, WNOHANG) == pid { return }
      usleep(20_000)
    }
    kill(pid, SIGKILL)
    waitpid(pid, &status, 0)
  }

  deinit {
    // A broker that died during its test (nothing stopped it) says why, for the test's log.
    if let pid {
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        self.pid = nil
        FileHandle.standardError.write(
          Data("MosquittoBroker on port \(port) had exited (status \(status)): \(logTail())\n".utf8)
        )
      }
    }
    stop()
    try? FileManager.default.removeItem(at: directory)
  }

  struct BrokerError: Error {
    let message: String
    /// The broker process ended by itself before it listened.
    var exited = false
  }

  /// A CA and a server certificate for 127.0.0.1 (an IP subject alternative name, which
  /// libmosquitto checks), EC P-256 keys, valid for two days.
  private static func makeCertificates(in directory: URL) throws {
    let dir = directory.path
    try "subjectAltName=IP:127.0.0.1\n".write(
      toFile: "\(dir)/san.cnf", atomically: true, encoding: .utf8)
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for arguments in [
      ["req", "-x509"] + ec + [
        "-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj",
        "/CN=blekit test CA",
      ],
      ["req"] + ec + [
        "-keyout", "\(dir)/server.key", "-out", "\(dir)/server.csr", "-subj", "/CN=127.0.0.1",
      ],
      [
        "x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.pem", "-CAkey",
        "\(dir)/ca.key", "-CAcreateserial", "-out", "\(dir)/server.pem", "-days", "2",
        "-extfile", "\(dir)/san.cnf",
      ],
    ] {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
      process.arguments = arguments
      process.standardOutput = FileHandle.nullDevice
      process.standardError = FileHandle.nullDevice
      try process.run()
      waitForExit(process)
      guard process.terminationStatus == 0 else {
        throw BrokerError(message: "openssl \(arguments[0]) failed")
      }
    }
  }

  /// Whether something accepts TCP connections on the loopback port.
  static func accepts(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
    guard connected else { return false }
    // A connect to a loopback port nobody listens on yet can connect to itself when the kernel
    // hands the probe that same number as its local port (TCP's simultaneous open; the port
    // comes from the ephemeral range): that is not the broker.
    var local = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &local) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return named == 0 && Int(UInt16(bigEndian: local.sin_port)) != port
  }

  static func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0 else { throw BrokerError(message: "no free port") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
  }
}
