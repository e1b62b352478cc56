// Test helpers: a private bus per test (TestSupport) and running external clients.
import DBus
import Foundation
import TestSupport

/// A private message bus for one test (see TestSupport's ``PrivateBus``).
typealias TestBus = PrivateBus

/// Runs `body` with a fresh private bus, stopping it afterwards.
func withTestBus<T>(_ body: (TestBus) async throws -> T) async throws -> T {
  try await withPrivateBus(name: "dbus", body)
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
  let run = try runCapturing(process)
  return (run.status, run.output, run.error)
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
  let run = try runCapturing(process, input: Data(input.utf8))
  return (run.status, run.output, run.error)
}

/// `dbus-send --print-reply` on the test bus.
func dbusSend(_ bus: TestBus, _ arguments: [String]) async throws -> String {
  let result = try await runAsync(
    "/usr/bin/dbus-send",
    ["--bus=\(bus.address)", "--print-reply", "--reply-timeout=5000"] + arguments)
  guard result.status == 0 else { throw DBusError(code: .remote, message: result.error) }
  return result.output
}
