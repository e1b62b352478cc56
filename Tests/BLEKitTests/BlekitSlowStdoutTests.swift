// `blekit notify` writing into a pipe nobody reads for a while: the executable against a
// stand-in bluetoothd on a private dbus-daemon (its system bus), whose characteristic sends
// 10,000 notifications of 100 bytes (StartNotify, PropertiesChanged signals) at once. blekit's stream holds
// at most NotificationStream.bufferLimit of them; the rest are dropped, and blekit says how
// many on standard error and exits 13. Every value is either printed or counted.
import BlueZ
import DBus
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

@Suite(
  .enabled(if: builtBlekit != nil, "the blekit executable was not built"),
  .timeLimit(.minutes(1)))
struct BlekitSlowStdoutTests {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_03")
  static let service = device.appending("service0010")
  static let characteristic = service.appending("char0011")
  static let characteristicUUID = "6e7a0111-5d3b-4c1e-9a0b-1a2b3c4d5e6f"
  static let sent = 10_000
  /// Bytes in each value: its number (4 bytes, big-endian), then padding. A printed line is
  /// 201 bytes, so a 64 KiB pipe holds about 326 of them.
  static let valueLength = 100

  @Test func notifyIntoAPipeNobodyReadsCountsWhatItDropped() async throws {
    let binary = try #require(builtBlekit)
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      Self.device, address: "00:AA:01:01:00:03", service: Self.service,
      serviceUUID: "6e7a0100-5d3b-4c1e-9a0b-1a2b3c4d5e6f")
    let connection = bluez.connection
    let emitted = Emitted()
    var interface = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      [
        "UUID": .string(Self.characteristicUUID), "Service": .objectPath(Self.service),
        "Flags": .strings(["notify"]),
      ])
    interface.methods.append(
      ExportedMethod(name: "StartNotify", inSignature: "", outSignature: "") { _ in
        // On a thread of its own: 10,000 emissions in a row would hold a cooperative thread
        // that the tests beside this one need.
        Thread {
          Thread.sleep(forTimeInterval: 0.1)
          for index in 0..<Self.sent {
            let value =
              withUnsafeBytes(of: UInt32(index).bigEndian) { Array($0) }
              + [UInt8](repeating: 0xAB, count: Self.valueLength - 4)
            try? connection.emitPropertiesChanged(
              path: Self.characteristic, interface: GattCharacteristic1.interface,
              changed: ["Value": .bytes(value)])
          }
          emitted.done.withLock { $0 = true }
        }.start()
        return []
      })
    interface.methods.append(
      ExportedMethod(name: "StopNotify", inSignature: "", outSignature: "") { _ in [] })
    try connection.export(ExportedObject(interfaces: [interface]), at: Self.characteristic)

    let process = Process()
    process.executableURL = binary
    process.arguments = [
      "notify", "00:AA:01:01:00:03", Self.characteristicUUID, "--duration", "12",
    ]
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
    process.environment = environment
    let output = Pipe()
    let errors = Pipe()
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Nobody reads standard output until every value has been sent, and a second more.
    for _ in 0..<300 where !emitted.done.withLock({ $0 }) {
      try await Task.sleep(for: .milliseconds(50))
    }
    #expect(emitted.done.withLock { $0 })
    try await Task.sleep(for: .seconds(1))
    // Read on a thread of its own: a blocking read on one of the few cooperative threads
    // would starve the tests running beside this one.
    let outputEnd = output.fileHandleForReading
    let errorsEnd = errors.fileHandleForReading
    let (printed, errorBytes) = await withCheckedContinuation {
      (done: CheckedContinuation<(Data, Data), Never>) in
      Thread {
        let printed = outputEnd.readDataToEndOfFile()
        done.resume(returning: (printed, errorsEnd.readDataToEndOfFile()))
      }.start()
    }
    let stderr = String(decoding: errorBytes, as: UTF8.self)
    for _ in 0..<100 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
    try #require(!process.isRunning)
    let lines = String(decoding: printed, as: UTF8.self).split(separator: "\n")
    #expect(process.terminationStatus == 13, "stderr: \(stderr)")
    // The lines printed are the first values, in order (one gap at most, where values were
    // dropped, then later ones when there was room again).
    let numbers = lines.compactMap { UInt32($0.prefix(8), radix: 16) }
    #expect(numbers.count == lines.count)
    #expect(numbers == numbers.sorted())
    let dropLine = try #require(
      stderr.split(separator: "\n").first { $0.contains("values were dropped") })
    let dropped = try #require(Int(dropLine.split(separator: " ")[1]))
    // Every value was printed or counted, and the stream held no more than its bound: what
    // was printed is at most the bound plus what the pipe took before it was full.
    #expect(lines.count + dropped == Self.sent, "\(lines.count) printed, \(dropped) dropped")
    #expect(lines.count >= NotificationStream.bufferLimit)
    // 201 bytes a line; a pipe holds 64 KiB; one value in hand.
    #expect(lines.count <= NotificationStream.bufferLimit + 65_536 / 201 + 2)
    #expect(dropLine.hasPrefix("blekit: "))
  }

  final class Emitted: Sendable {
    let done = Mutex(false)
  }
}
