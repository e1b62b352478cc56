import BLEKit
import Testing

@Suite struct L2CAPMessageFramingTests {
  let message: [UInt8] = Array("The quick brown fox jumps over the lazy dog".utf8)

  @Test func headerLayout() throws {
    let header = L2CAPMessageHeader(for: message)
    // CRC-32 (IEEE) of the classic sentence is 0x414FA339.
    #expect(header.checksum == 0x414F_A339)
    #expect(
      header.bytes == Array("BLKL".utf8) + [2, 43, 0, 0, 0, 0x39, 0xA3, 0x4F, 0x41])
    #expect(try L2CAPMessageHeader(bytes: header.bytes) == header)
    #expect(header.isWindowed)
    // Version 1 (no window) is still received.
    var first = header.bytes
    first[4] = 1
    let old = try L2CAPMessageHeader(bytes: first)
    #expect(old.version == 1 && !old.isWindowed && old.length == 43)
  }

  @Test func windowLayout() {
    let window = L2CAPMessageWindow(received: 0x0102_0304)
    #expect(window.bytes == Array("WIN".utf8) + [4, 3, 2, 1])
    #expect(L2CAPMessageWindow(bytes: window.bytes) == window)
    #expect(L2CAPMessageWindow(bytes: L2CAPMessageAcknowledgement(checksum: 1).bytes) == nil)
  }

  @Test func refusesAnythingButAHeader() {
    #expect(throws: BluetoothError.self) { try L2CAPMessageHeader(bytes: self.message) }
    var bytes = L2CAPMessageHeader(for: message).bytes
    bytes[4] = 3
    #expect(throws: BluetoothError.notAMessage("framing version 3; this receiver knows 1 to 2")) {
      try L2CAPMessageHeader(bytes: bytes)
    }
  }

  @Test func assemblesAndVerifiesAcrossAnySDUSizes() throws {
    let big = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    for size in [1, 7, 23, 251, 672, 65535] {
      var assembler = try L2CAPMessageAssembler(
        headerSDU: L2CAPMessageHeader(for: big).bytes, limit: 1 << 24)
      var start = 0
      while start < big.count {
        let end = min(start + size, big.count)
        try assembler.append(Array(big[start..<end]))
        start = end
      }
      #expect(assembler.isComplete)
      #expect(try assembler.verified() == big)
    }
  }

  @Test func anEmptyMessageIsCompleteAtOnce() throws {
    let assembler = try L2CAPMessageAssembler(
      headerSDU: L2CAPMessageHeader(for: []).bytes, limit: 10)
    #expect(assembler.isComplete)
    #expect(try assembler.verified() == [])
  }

  @Test func aCutMessageIsNeverReturned() throws {
    var assembler = try L2CAPMessageAssembler(
      headerSDU: L2CAPMessageHeader(for: message).bytes, limit: 1000)
    try assembler.append(Array(message.prefix(10)))
    #expect(!assembler.isComplete)
    #expect(throws: BluetoothError.cut(received: 10, sdus: 1, expected: 43)) {
      try assembler.verified()
    }
  }

  @Test func aCorruptByteFailsTheChecksum() throws {
    var corrupt = message
    corrupt[5] ^= 0x01
    var assembler = try L2CAPMessageAssembler(
      headerSDU: L2CAPMessageHeader(for: message).bytes, limit: 1000)
    try assembler.append(corrupt)
    #expect(throws: BluetoothError.self) { try assembler.verified() }
    do {
      _ = try assembler.verified()
    } catch {
      guard error.code == .checksumMismatch, let checksums = error.checksums else {
        Issue.record("expected a checksum mismatch, got \(error)")
        return
      }
      #expect(checksums.expected == 0x414F_A339)
      #expect(checksums.actual != checksums.expected)
    }
  }

  @Test func extraBytesAndOversizedMessagesAreRefused() throws {
    var assembler = try L2CAPMessageAssembler(
      headerSDU: L2CAPMessageHeader(for: message).bytes, limit: 1000)
    #expect(throws: BluetoothError.trailingBytes(expected: 43, received: 44)) {
      try assembler.append(self.message + [0])
    }
    #expect(throws: BluetoothError.tooLarge(length: 43, limit: 42)) {
      try L2CAPMessageAssembler(headerSDU: L2CAPMessageHeader(for: self.message).bytes, limit: 42)
    }
  }

  @Test func acknowledgementCarriesTheChecksum() {
    let acknowledgement = L2CAPMessageAcknowledgement(checksum: 0x0102_0304)
    #expect(acknowledgement.bytes == Array("ACK".utf8) + [4, 3, 2, 1])
    #expect(L2CAPMessageAcknowledgement(bytes: acknowledgement.bytes) == acknowledgement)
    #expect(L2CAPMessageAcknowledgement(bytes: Array("NAK".utf8) + [4, 3, 2, 1]) == nil)
    #expect(L2CAPMessageAcknowledgement(bytes: [1, 2]) == nil)
  }

  @Test func aHeaderAnnouncingALotReservesNothingForIt() throws {
    // 13 bytes announcing 16 MiB: memory follows the bytes that arrive, not the announcement.
    let header = L2CAPMessageHeader(length: 16 << 20, checksum: 0)
    var assembler = try L2CAPMessageAssembler(headerSDU: header.bytes, limit: 16 << 20)
    #expect(assembler.bytes.capacity < 64 * 1024, "\(assembler.bytes.capacity) bytes reserved")
    try assembler.append([UInt8](repeating: 1, count: 1000))
    #expect(assembler.bytes.capacity < 64 * 1024, "\(assembler.bytes.capacity) bytes reserved")
  }
}
