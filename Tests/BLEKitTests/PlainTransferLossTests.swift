// A plain transfer (Apple's chunks, then EOM) from a stand-in bluetoothd on a private bus whose
// AcquireNotify socket overflows, as bluetoothd's does under a flood: a value that does not fit
// is dropped (bluetoothd writes without blocking and gives up on EAGAIN). The chunks carry no
// numbers, so the message would come out short with no sign; TransferCentral must refuse it
// (`chunksMayBeLost`). The same transfer paced so the socket never fills arrives exact.
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

@Suite(.timeLimit(.minutes(1))) struct PlainTransferLossTests {
  static let device = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
  static let service = device.appending("service0010")
  static let characteristic = service.appending("char0011")
  /// 600 chunks of 244 bytes (a full value at MTU 247), chunk `i` filled with `i % 251`.
  static let chunks = (0..<600).map { [UInt8](repeating: UInt8($0 % 251), count: 244) }

  /// How the stand-in writes the chunks to its end of the socket pair.
  enum Sending: Sendable {
    /// Without blocking, before the reader starts, until a write fails (that chunk is dropped,
    /// as bluetoothd drops it), then the rest, waiting for room: the message lacks one chunk.
    case overflowing
    /// Only while the sender's queued memory is under a fifth of its buffer: never near full.
    case paced
    /// Paced, then without pause 20 chunks more after EOM (a peer that goes on notifying):
    /// they come in the burst that brought EOM, or later, and are no part of the message.
    case pacedThenMore
  }

  /// The sender's queued kernel memory (SIOCOUTQ on a Unix socket: its `sk_wmem_alloc`).
  static func queued(_ fd: Int32) -> Int {
    var queued: Int32 = 0
    return ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 ? Int(queued) : 0
  }

  static func send(_ value: [UInt8], on fd: Int32, flags: Int32) -> Bool {
    value.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, flags) } == value.count
  }

  /// The flood before the reader: chunks written without blocking until one does not fit
  /// (dropped, as bluetoothd drops it). Returns the index of the next chunk to send.
  static func overflow(_ fd: Int32) -> Int {
    var next = 0
    while next < chunks.count {
      defer { next += 1 }
      if !send(chunks[next], on: fd, flags: Int32(MSG_DONTWAIT)) { break }
    }
    return next
  }

  /// Writes chunks `from...` and EOM, waiting for room (paced: only while the queued memory is
  /// under a fifth of the send buffer).
  static func write(on fd: Int32, from first: Int, paced: Bool, more: Int = 0) {
    for chunk in chunks[first...] {
      if paced {
        while queued(fd) > NotificationBacklog.systemSenderBuffer / 5 { usleep(1_000) }
      }
      guard send(chunk, on: fd, flags: 0) else { return }
    }
    _ = send(Array("EOM".utf8), on: fd, flags: 0)
    for chunk in chunks.prefix(more) { _ = send(chunk, on: fd, flags: 0) }
  }

  /// Serves one connected device with the transfer service's plain characteristic; its
  /// AcquireNotify writes the message as `sending` says. Returns what `receive` gave or threw,
  /// and the chunks the stand-in dropped.
  static func receive(_ sending: Sending) async throws -> (
    Result<TransferCentral.Received, any Error>, dropped: Int
  ) {
    let bus = try PrivateBus()
    defer { bus.stop() }
    let bluez = try await FakeBlueZObjects(bus: bus)
    defer { bluez.close() }
    try bluez.exportAdapter("hci0", powered: true)
    try bluez.exportConnectedDevice(
      device, address: "00:AA:01:01:00:01", service: service,
      serviceUUID: BlekitUUID.transferService.description)
    let dropped = Mutex<Int?>(nil)
    var plain = FakeBlueZObjects.interface(
      GattCharacteristic1.interface,
      [
        "UUID": .string(BlekitUUID.transferCharacteristic.description),
        "Service": .objectPath(service), "MTU": .uint16(247),
        "Flags": .strings(["write-without-response", "notify"]),
      ])
    plain.methods.append(
      ExportedMethod(name: "AcquireNotify", inSignature: "a{sv}", outSignature: "hq") { _ in
        let fds = try FakeBlueZObjects.socketPair()
        let ours = fds.kept
        // Overflowing: the flood comes before the reader starts, and a chunk is lost.
        let first = sending == .overflowing ? overflow(ours) : 0
        dropped.withLock { $0 = first == 0 ? 0 : 1 }
        // A thread of its own, not Dispatch's global queue: the writes block (pacing, waiting
        // for room), and on Linux Swift's tasks run on that queue's few threads.
        Thread {
          write(
            on: ours, from: first, paced: sending != .overflowing,
            more: sending == .pacedThenMore ? 20 : 0)
          close(ours)
        }.start()
        return [.unixFD(FileDescriptor(owning: fds.handedOut)), .uint16(247)]
      })
    plain.methods.append(
      ExportedMethod(name: "WriteValue", inSignature: "aya{sv}", outSignature: "") { _ in [] })
    try bluez.connection.export(ExportedObject(interfaces: [plain]), at: characteristic)

    let central = try await CentralManager.open(connection: try bus.connect())
    let identifier = try #require(
      await central.peripheral(address: BluetoothAddress("00:AA:01:01:00:01")))
    let peripheral = Peripheral(identifier: identifier, manager: central)
    let receiver = TransferCentral(manager: central)
    // This stand-in has no Generic Attribute service, so the order counts as unknown.
    let result: Result<TransferCentral.Received, any Error>
    do {
      result = .success(
        try await receiver.receive(
          on: peripheral, options: .init(idleTimeout: .seconds(10), acceptUnordered: true)))
    } catch {
      result = .failure(error)
    }
    await central.close()
    return (result, try #require(dropped.withLock { $0 }))
  }

  @Test func aMessageMissingAChunkBluetoothdDroppedIsRefused() async throws {
    let (result, dropped) = try await Self.receive(.overflowing)
    #expect(dropped == 1)
    switch result {
    case .success(let received):
      Issue.record(
        "a message of \(received.byteCount) bytes was returned; \(Self.chunks.count * 244) were sent, one chunk dropped"
      )
    case .failure(let error):
      guard let error = error as? BluetoothError, error.code == .chunksMayBeLost else {
        Issue.record("expected chunksMayBeLost, got \(error)")
        return
      }
      #expect(error.message.contains("may have dropped"))
    }
  }

  @Test func aPacedMessageArrivesExact() async throws {
    let (result, dropped) = try await Self.receive(.paced)
    #expect(dropped == 0)
    let received = try result.get()
    #expect(received.bytes == Self.chunks.flatMap { $0 })
    #expect(received.framing == .plain)
  }

  @Test func valuesAfterTheEndAreNoPartOfTheMessage() async throws {
    let (result, dropped) = try await Self.receive(.pacedThenMore)
    #expect(dropped == 0)
    let received = try result.get()
    #expect(received.bytes == Self.chunks.flatMap { $0 })
  }
}
