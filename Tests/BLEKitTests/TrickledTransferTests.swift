// A peer that trickles a GATT transfer forever, from a stand-in bluetoothd on a private bus:
// repeated frames (traffic, no progress) must end the receive at the idle timeout, and a byte
// every 100 ms (progress, never the end) at the deadline. Before TransferDeadlines, every
// notification reset a 15 s silence timer and there was no deadline: both held the receive
// for as long as the peer cared to.
import BlueZ
import Bluetooth
import DBus
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.timeLimit(.minutes(1))) struct TrickledTransferTests {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let service = device.appending("service0010")
  static let characteristic = service.appending("char0011")

  /// What the stand-in writes on the notification socket, every 100 ms until it is shut.
  enum Trickle: Sendable {
    /// The first frame of a sequenced message, again and again.
    case repeatedFrame
    /// One plain chunk of one byte at a time (never EOM).
    case oneByteChunks
  }

  /// Serves one connected device whose transfer characteristic trickles as `trickle` says;
  /// returns what `receive` threw (or gave) and how long it took. When the receive is still
  /// running after 10 s the stand-in shuts its socket (which ends the receive) and the test
  /// fails.
  static func receive(_ trickle: Trickle, options: TransferCentral.Options) async throws -> (
    Result<TransferCentral.Received, any Error>, Duration
  ) {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      device, address: "00:AA:01:01:00:01", service: service,
      serviceUUID: BlekitUUID.transferService.description)
    let sequenced = trickle == .repeatedFrame
    let socket = Mutex<Int32?>(nil)
    let stop = Atomic(false)
    var exported = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      [
        "UUID": .string(
          (sequenced
            ? BlekitUUID.sequencedTransferCharacteristic : BlekitUUID.transferCharacteristic)
            .description),
        "Service": .objectPath(service), "MTU": .uint16(247),
        "Flags": .strings(sequenced ? ["notify"] : ["write-without-response", "notify"]),
      ])
    let frame = try #require(
      try SequencedTransferEncoder(bytes: [UInt8](repeating: 7, count: 10_000), attMTU: 247)
        .nextFrame?.bytes)
    exported.methods.append(
      ExportedMethod(name: "AcquireNotify", inSignature: "a{sv}", outSignature: "hq") { _ in
        let fds = try FakeBlueZObjects.socketPair()
        let ours = fds.kept
        socket.withLock { $0 = ours }
        // A thread of its own, not Dispatch's global queue: this loop sleeps for seconds, and
        // on Linux Swift's tasks run on that queue's few threads (two of these loops and two
        // of PlainTransferLossTests' writers held all of them, and every test's tasks waited
        // 4-7 s: gdb on a stalled run).
        Thread {
          let value = sequenced ? frame : [0x55]
          while !stop.load(ordering: .relaxed) {
            let sent = value.withUnsafeBytes { Glibc.send(ours, $0.baseAddress, $0.count, 0) }
            if sent < 0 { break }
            usleep(100_000)
          }
          close(ours)
        }.start()
        return [.unixFD(FileDescriptor(owning: fds.handedOut)), .uint16(247)]
      })
    try bluez.connection.export(ExportedObject(interfaces: [exported]), at: characteristic)

    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let receiver = TransferCentral(manager: central)
    let start = ContinuousClock.now
    let guardTask = Task {
      try await Task.sleep(for: .seconds(10))
      Issue.record("the receive was still running after 10 s")
      if let fd = socket.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }
    let result: Result<TransferCentral.Received, any Error>
    do {
      result = .success(try await receiver.receive(on: peripheral, options: options))
    } catch {
      result = .failure(error)
    }
    let took = ContinuousClock.now - start
    guardTask.cancel()
    stop.store(true, ordering: .relaxed)
    await central.close()
    return (result, took)
  }

  /// The cause's message of a transfer interrupted by a timeout, or nil.
  static func timeoutCause(_ result: Result<TransferCentral.Received, any Error>) -> String? {
    guard case .failure(let error as BluetoothError) = result,
      error.code == .transferInterrupted, let cut = error.interruptedTransfer,
      cut.cause == .timeout
    else { return nil }
    return error.message
  }

  @Test func repeatedFramesAreNotProgress() async throws {
    var options = TransferCentral.Options(idleTimeout: .seconds(1))
    options.deadline = .seconds(30)
    let (result, took) = try await Self.receive(.repeatedFrame, options: options)
    let message = Self.timeoutCause(result)
    #expect(message?.contains("no progress for 1 s") == true, "\(result)")
    #expect(took < .seconds(8))
  }

  @Test func aByteNowAndThenMeetsTheDeadline() async throws {
    // A byte every 100 ms never goes 1.9 s without progress, even on a loaded machine.
    var options = TransferCentral.Options(
      idleTimeout: .milliseconds(1900), acceptUnordered: true)
    options.deadline = .seconds(2)
    let (result, took) = try await Self.receive(.oneByteChunks, options: options)
    let message = Self.timeoutCause(result)
    #expect(message?.contains("not finished within 2 s") == true, "\(result)")
    #expect(took < .seconds(8))
  }

  /// Set around a receive: a task of the transfer's own inherits it, the socket reader's
  /// thread does not.
  enum InTransfer {
    @TaskLocal static var marked = false
  }

  /// The progress callback runs on a task of the transfer's, never on the socket reader's
  /// thread under its lock (where it ran before: every call after the stream's diversion saw
  /// no task-local value).
  @Test func progressRunsOnATaskOfTheTransferNotOnTheReadersThread() async throws {
    let calls = Mutex<[Bool]>([])
    var options = TransferCentral.Options(
      idleTimeout: .milliseconds(1900), acceptUnordered: true)
    options.deadline = .seconds(2)
    options.progress = { _ in calls.withLock { $0.append(InTransfer.marked) } }
    _ = try await InTransfer.$marked.withValue(true) {
      try await Self.receive(.oneByteChunks, options: options)
    }
    let seen = calls.withLock { $0 }
    #expect(!seen.isEmpty, "\(seen)")
    #expect(seen.allSatisfy { $0 }, "\(seen)")
  }
}
