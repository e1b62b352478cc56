import BLEKit
import Testing

@Suite struct TransferReassemblerTests {
  func roundTrip(_ message: String, mtu: Int) throws -> String? {
    var reassembler = TransferReassembler()
    var result: [UInt8]?
    for chunk in try TransferChunker(message: message, attMTU: mtu) {
      #expect(result == nil, "a message came before EOM")
      result = try reassembler.receive(chunk)
    }
    return result.map { String(decoding: $0, as: UTF8.self) }
  }

  @Test(arguments: [0, 1, 19, 20, 21, 61, 509, 512, 1537, 64 << 10, 256 << 10])
  func roundTripsAt517And23(size: Int) throws {
    let message = asciiMessage(size)
    #expect(try roundTrip(message, mtu: 517) == message)
    #expect(try roundTrip(message, mtu: 23) == message)
  }

  @Test(arguments: [
    "EOM", "xEOM", "EOMEOM", "EOM at the start", "at the end EOM",
    String(repeating: "x", count: 20) + "EOM", String(repeating: "x", count: 509) + "EOM",
  ])
  func roundTripsMessagesContainingEOM(message: String) throws {
    #expect(try roundTrip(message, mtu: 23) == message)
    #expect(try roundTrip(message, mtu: 517) == message)
  }

  @Test func multiByteUTF8StraddlingEveryBoundary() throws {
    // Shift a 4-byte character across a 20-byte boundary at every offset.
    for prefix in 0..<24 {
      let message = String(repeating: "a", count: prefix) + "😀" + "ünïcödé" + "日本語"
      #expect(try roundTrip(message, mtu: 23) == message)
    }
    let big = String(repeating: "日本語テキスト😀", count: 10_000)
    #expect(try roundTrip(big, mtu: 517) == big)
  }

  @Test func bytesThatAreNotTextArriveExactly() throws {
    // A message is bytes: invalid UTF-8, NUL and a character cut in half come out as sent.
    var reassembler = TransferReassembler()
    let message: [UInt8] = [0x61, 0x62, 0xFF, 0x00, 0x63] + Array("あ".utf8).dropLast()
    #expect(try reassembler.receive(message[..<3]) == nil)
    #expect(try reassembler.receive(message[3...]) == nil)
    #expect(try reassembler.receive(Array("EOM".utf8)) == message)
    // The reassembler starts afresh after a message.
    #expect(reassembler.bytesReceived == 0)
    #expect(try reassembler.receive([0x6F, 0x6B]) == nil)
    #expect(try reassembler.receive(Array("EOM".utf8)) == Array("ok".utf8))
  }

  @Test func everyByteValueRoundTrips() throws {
    let message = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    for mtu in [23, 185, 517] {
      var reassembler = TransferReassembler()
      var result: [UInt8]?
      for chunk in try TransferChunker(bytes: message, attMTU: mtu) {
        result = try reassembler.receive(chunk)
      }
      #expect(result == message, "MTU \(mtu)")
    }
  }

  @Test func cutBeforeEOMReportsBytesSoFar() throws {
    var reassembler = TransferReassembler()
    var chunker = try TransferChunker(message: asciiMessage(50), attMTU: 23)
    _ = try reassembler.receive(chunker.next()!)
    _ = try reassembler.receive(chunker.next()!)
    #expect(reassembler.bytesReceived == 40)
    #expect(reassembler.chunksReceived == 2)
    let error = reassembler.incompleteError
    #expect(error == .incomplete(bytesReceived: 40, chunksReceived: 2))
    #expect(error.code == .transferInterrupted)
    #expect(
      error.interruptedTransfer
        == BluetoothError.InterruptedTransfer(bytesReceived: 40, chunksReceived: 2, cause: nil))
    #expect(
      error.description == "transfer cut before end of message: 40 bytes received in 2 chunks")
  }

  @Test func enforcesTheSizeLimit() throws {
    var reassembler = TransferReassembler(maximumMessageLength: 30)
    _ = try reassembler.receive([UInt8](repeating: 0x61, count: 20))
    #expect(throws: BluetoothError.messageTooLarge(limit: 30)) {
      try reassembler.receive([UInt8](repeating: 0x61, count: 20))
    }
  }

  @Test func consecutiveMessages() throws {
    var reassembler = TransferReassembler()
    for message in ["first", "", "third"] {
      var result: [UInt8]?
      for chunk in try TransferChunker(message: message, attMTU: 23) {
        result = try reassembler.receive(chunk)
      }
      #expect(result == Array(message.utf8))
    }
  }

  /// Documents the plain protocol's limit: a reordered message reassembles without any error,
  /// to the wrong bytes. Only the sequenced framing can detect reordering; a receiver must
  /// know the link keeps the order (`TransferOrder`).
  @Test func plainProtocolCannotDetectReordering() throws {
    let message = asciiMessage(60)
    var chunks = Array(try TransferChunker(message: message, attMTU: 23))
    chunks.swapAt(0, 1)
    var reassembler = TransferReassembler()
    var result: [UInt8]?
    for chunk in chunks { result = try reassembler.receive(chunk) }
    #expect(result != nil)
    #expect(result != Array(message.utf8))
  }
}
