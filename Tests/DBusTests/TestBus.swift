// A private dbus-daemon per test, started from a config written into a temp directory.
import DBus
import Foundation

/// A private message bus for one test. Stop it with `stop()` (done by `withTestBus`).
final class TestBus: Sendable {
  let address: String
  let directory: URL
  private let process: Process

  init() throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("blekit-dbus-\(UUID().uuidString.prefix(8))")
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

  func stop() {
    // SIGKILL: the daemon may inherit a signal mask that blocks SIGTERM from the test runner.
    if process.isRunning {
      kill(process.processIdentifier, SIGKILL)
      process.waitUntilExit()
    }
    try? FileManager.default.removeItem(at: directory)
  }
}

/// Runs `body` with a fresh private bus, stopping it afterwards.
func withTestBus<T>(_ body: (TestBus) async throws -> T) async throws -> T {
  let bus = try TestBus()
  defer { bus.stop() }
  return try await body(bus)
}

/// Runs an external command (dbus-send, python3) and returns its standard output.
@discardableResult
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:])
  throws -> (status: Int32, output: String, error: String)
{
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  var env = ProcessInfo.processInfo.environment
  for (key, value) in environment { env[key] = value }
  process.environment = env
  let out = Pipe()
  let err = Pipe()
  process.standardOutput = out
  process.standardError = err
  try process.run()
  let outData = out.fileHandleForReading.readDataToEndOfFile()
  let errData = err.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return (
    process.terminationStatus, String(decoding: outData, as: UTF8.self),
    String(decoding: errData, as: UTF8.self)
  )
}

/// Runs `body` with a fresh bus and two connections (server exporting `echoObject()` at
/// `/test`, and a client), closing both and stopping the bus afterwards.
func withServerAndClient<T>(
  _ body: (TestBus, DBusConnection, DBusConnection) async throws -> T
) async throws -> T {
  try await withTestBus { bus in
    let server = try bus.connect()
    let client = try bus.connect()
    defer {
      client.close()
      server.close()
    }
    try server.export(echoObject(), at: "/test")
    return try await body(bus, server, client)
  }
}

/// Calls `org.blekit.Test.<member>` on the server's `/test` object.
func callTest(
  _ client: DBusConnection, _ server: DBusConnection, _ member: MemberName,
  _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)
) async throws -> [DBusValue] {
  try await client.call(
    destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
    member: member, arguments: arguments, timeout: timeout)
}

/// `callTest` as a Result with the typed error, for use in child tasks.
func callTestResult(
  _ client: DBusConnection, _ server: DBusConnection, _ member: MemberName,
  timeout: Duration = .seconds(25)
) async -> Result<[DBusValue], DBusError> {
  do throws(DBusError) {
    return .success(
      try await client.call(
        destination: server.uniqueName, path: "/test", interface: "org.blekit.Test",
        member: member, timeout: timeout))
  } catch {
    return .failure(error)
  }
}

/// The match rules the bus holds for `connection` (org.freedesktop.DBus.Debug.Stats).
func matchRules(of connection: DBusConnection, askingWith other: DBusConnection) async throws
  -> [String]
{
  let reply = try await other.call(
    destination: .bus, path: "/org/freedesktop/DBus",
    interface: "org.freedesktop.DBus.Debug.Stats", member: "GetAllMatchRules")
  for entry in reply.first?.dictionaryValue ?? []
  where entry.key.stringValue == connection.uniqueName.rawValue {
    return entry.value.stringArrayValue ?? []
  }
  return []
}

/// `run` on its own thread, so that waiting for the child does not hold a cooperative thread
/// the code under test needs.
func runAsync(_ executable: String, _ arguments: [String], input: String? = nil) async throws
  -> (status: Int32, output: String, error: String)
{
  let box: @Sendable () throws -> (status: Int32, output: String, error: String) = {
    if let input { return try runWithInput(executable, arguments, input: input) }
    return try run(executable, arguments)
  }
  return try await withCheckedThrowingContinuation { continuation in
    let thread = Thread { continuation.resume(with: Result { try box() }) }
    thread.start()
  }
}

private func runWithInput(_ executable: String, _ arguments: [String], input: String) throws
  -> (status: Int32, output: String, error: String)
{
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  let stdin = Pipe()
  let out = Pipe()
  let err = Pipe()
  process.standardInput = stdin
  process.standardOutput = out
  process.standardError = err
  try process.run()
  stdin.fileHandleForWriting.write(Data(input.utf8))
  try stdin.fileHandleForWriting.close()
  let outData = out.fileHandleForReading.readDataToEndOfFile()
  let errData = err.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return (
    process.terminationStatus, String(decoding: outData, as: UTF8.self),
    String(decoding: errData, as: UTF8.self)
  )
}

/// `dbus-send --print-reply` on the test bus.
func dbusSend(_ bus: TestBus, _ arguments: [String]) async throws -> String {
  let result = try await runAsync(
    "/usr/bin/dbus-send",
    ["--bus=\(bus.address)", "--print-reply", "--reply-timeout=5000"] + arguments)
  guard result.status == 0 else { throw DBusError(code: .remote, message: result.error) }
  return result.output
}
