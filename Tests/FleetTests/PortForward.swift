// A TCP port forward in front of a test broker, that behaves as the lab's forward (qemu's
// guestfwd running socat) does when the broker is down: it accepts the connection, answers
// with socat's kind of error line and closes. libmosquitto reads that line's first bytes
// ("2026/...") as a PUBLISH before any CONNACK: a protocol error.

import Foundation
import TestSupport

/// A forward (a small Python server) on a free loopback port: each connection is relayed to
/// `target`; while nothing listens there, the client gets an error line
/// ("2026/12/05 03:25:39 forward E connect(127.0.0.1:PORT): Connection refused") and the
/// connection is closed.
final class PortForward: @unchecked Sendable {
  let port: Int
  private let process = Process()

  /// The forward: one thread per direction per connection.
  private static let program = """
    import socket, sys, threading, time
    listener = socket.create_server(("127.0.0.1", int(sys.argv[1])), reuse_port=False)
    target = ("127.0.0.1", int(sys.argv[2]))
    def pump(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    while True:
        client, _ = listener.accept()
        try:
            server = socket.create_connection(target)
        except OSError as error:
            stamp = time.strftime("%Y/%m/%d %H:%M:%S")
            line = f"{stamp} forward E connect({target[0]}:{target[1]}): {error.strerror}\\n"
            client.sendall(line.encode())
            client.close()
            continue
        threading.Thread(target=pump, args=(client, server), daemon=True).start()
        threading.Thread(target=pump, args=(server, client), daemon=True).start()
    """

  init(to target: Int) throws {
    port = try MosquittoBroker.freePort()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", Self.program, String(port), String(target)]
    process.standardError = FileHandle.nullDevice
    try process.run()
    // Listening within 5 s, or the test fails here.
    for _ in 0..<250 {
      if MosquittoBroker.accepts(port: port) { return }
      usleep(20_000)
    }
    stop()
    throw MosquittoBroker.BrokerError(
      message: "the forward did not listen on port \(port) within 5 s")
  }

  /// SIGKILL: the test process blocks SIGTERM in its threads, and its children inherit that.
  func stop() {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGKILL)
    waitForExit(process)
  }
}
