// The blekit executable when the system bus goes away: `scan`, `monitor` and `advertise`
// (without --timeout) run against a stand-in for bluetoothd on a private bus, which is then
// killed; each must exit 4 within seconds with one line on stderr. (The lab's faults suite
// does the same with a real dbus-daemon and bluetoothd.)
import DBus
import Foundation
import TestSupport
import Testing

private let blekitBinary = builtBlekit

/// A blekit process on `bus` (as its system bus), its output in temporary files.
final class BlekitProcess: Sendable {
  let process: Process
  let output: URL
  let errors: URL

  init(_ arguments: [String], bus: PrivateBus) throws {
    let binary = try #require(blekitBinary)
    // Not in the bus's directory: stopping the bus removes that.
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("blekit-cli-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    output = directory.appendingPathComponent("stdout")
    errors = directory.appendingPathComponent("stderr")
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    process = Process()
    process.executableURL = binary
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
    process.environment = environment
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = try FileHandle(forWritingTo: output)
    process.standardError = try FileHandle(forWritingTo: errors)
    try process.run()
  }

  /// The exit status, once the process has ended by itself within `limit`; nil (and the
  /// process killed) when it had not.
  func exitStatus(within limit: Duration) async -> Int32? {
    let deadline = ContinuousClock.now + limit
    while process.isRunning && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(50))
    }
    if process.isRunning {
      process.interrupt()
      try? await Task.sleep(for: .milliseconds(500))
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      return nil
    }
    return process.terminationStatus
  }

  var standardError: String {
    (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
  }
  var standardOutput: String {
    (try? String(contentsOf: output, encoding: .utf8)) ?? ""
  }

  deinit { try? FileManager.default.removeItem(at: output.deletingLastPathComponent()) }
}

/// Polls `condition` for up to `seconds` (a fresh process takes a while to start here).
private func eventually(seconds: Int, _ condition: () -> Bool) async -> Bool {
  for _ in 0..<(seconds * 20) {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(50))
  }
  return condition()
}

@Suite(
  .enabled(if: blekitBinary != nil, "the blekit executable was not built"),
  .timeLimit(.minutes(1)))
struct BlekitBusLossTests {
  static let line = "blekit: lost the connection to the system bus\n"

  @Test(arguments: [["scan", "-a", "hci0", "--json"], ["monitor", "-a", "hci0"]])
  func aScanExitsFourWhenTheBusDies(_ arguments: [String]) async throws {
    let bus = try PrivateBus(name: "cli")
    defer { bus.stop() }
    let bluez = try await FakeScanningBlueZ(bus: bus)
    defer { bluez.close() }
    let blekit = try BlekitProcess(arguments, bus: bus)
    #expect(await eventually(seconds: 20) { bluez.count("StartDiscovery") >= 1 })
    bus.stop()
    let status = await blekit.exitStatus(within: .seconds(10))
    #expect(status == 4, "stderr: \(blekit.standardError)")
    #expect(blekit.standardError == Self.line)
    if arguments[0] == "monitor" {
      #expect(blekit.standardOutput.hasPrefix("monitored "))
    }
  }

  @Test func advertiseExitsFourWhenTheBusDies() async throws {
    let bus = try PrivateBus(name: "cli")
    defer { bus.stop() }
    let bluetoothd = try await FakeBluetoothd(bus: bus)
    defer { bluetoothd.close() }
    let blekit = try BlekitProcess(["advertise", "-a", "hci0", "-m", "hello"], bus: bus)
    #expect(
      await eventually(seconds: 20) {
        bluetoothd.registry.advertisements.withLock { $0.count } == 1
      })
    bus.stop()
    let status = await blekit.exitStatus(within: .seconds(10))
    #expect(status == 4, "stderr: \(blekit.standardError)")
    #expect(blekit.standardError == Self.line)
  }
}
