import BLEKit
import Testing

@Suite struct TransferChunkerTests {
  static let eom: [UInt8] = Array("EOM".utf8)

  func chunks(_ message: String, mtu: Int) throws -> [[UInt8]] {
    Array(try TransferChunker(message: message, attMTU: mtu))
  }

  /// Checks the invariants of any chunking, and returns the data chunks.
  func checkInvariants(_ chunks: [[UInt8]], message: [UInt8], chunkLength: Int) -> [[UInt8]] {
    #expect(chunks.last == Self.eom)
    let data = Array(chunks.dropLast())
    #expect(data.allSatisfy { $0 != Self.eom }, "a data chunk equals EOM")
    #expect(data.allSatisfy { !$0.isEmpty && $0.count <= chunkLength })
    #expect(Array(data.joined()) == message)
    return data
  }

  @Test(arguments: [
    (23, 20), (24, 21), (185, 182), (247, 244), (515, 512), (517, 512),
    (1000, 512),
  ])
  func chunkLengthIsMTUMinus3CappedAt512(mtu: Int, expected: Int) throws {
    #expect(try TransferLimits.maximumValueLength(forATTMTU: mtu) == expected)
    #expect(try TransferChunker(message: "", attMTU: mtu).chunkLength == expected)
  }

  @Test(arguments: [0, 3, 22, -1])
  func rejectsMTUBelow23(mtu: Int) {
    #expect(throws: BluetoothError.mtuTooSmall(mtu)) {
      try TransferChunker(message: "x", attMTU: mtu)
    }
  }

  @Test func emptyMessageIsJustEOM() throws {
    #expect(try chunks("", mtu: 517) == [Self.eom])
  }

  @Test func oneByte() throws {
    #expect(try chunks("a", mtu: 517) == [[0x61], Self.eom])
  }

  @Test(arguments: [23, 517])
  func exactlyOneChunk(mtu: Int) throws {
    let length = try TransferLimits.maximumValueLength(forATTMTU: mtu)
    let message = asciiMessage(length)
    let result = try chunks(message, mtu: mtu)
    #expect(result.count == 2)
    #expect(result[0].count == length)
  }

  @Test(arguments: [23, 517])
  func threeChunksPlusOneByte(mtu: Int) throws {
    let length = try TransferLimits.maximumValueLength(forATTMTU: mtu)
    let message = asciiMessage(3 * length + 1)
    let result = try chunks(message, mtu: mtu)
    #expect(result.map(\.count) == [length, length, length, 1, 3])
    _ = checkInvariants(result, message: Array(message.utf8), chunkLength: length)
  }

  @Test(arguments: [64 << 10, 256 << 10])
  func largeMessagesAt517Use512ByteChunks(size: Int) throws {
    let message = asciiMessage(size)
    let result = try chunks(message, mtu: 517)
    #expect(result.count == size / 512 + 1)
    let data = checkInvariants(result, message: Array(message.utf8), chunkLength: 512)
    #expect(data.allSatisfy { $0.count == 512 })
  }

  @Test func messageEOMIsNotSentAsEOM() throws {
    let result = try chunks("EOM", mtu: 517)
    #expect(result == [Array("EO".utf8), Array("M".utf8), Self.eom])
  }

  @Test(arguments: [23, 517])
  func lastChunkThatWouldBeEOMIsSplit(mtu: Int) throws {
    let length = try TransferLimits.maximumValueLength(forATTMTU: mtu)
    let message = asciiMessage(length) + "EOM"
    let result = try chunks(message, mtu: mtu)
    let data = checkInvariants(result, message: Array(message.utf8), chunkLength: length)
    #expect(data.map(\.count) == [length, 2, 1])
  }

  @Test func eomInsideAMessageIsJustText() throws {
    let message = "before EOM after EOMEOM and EOM"
    let result = try chunks(message, mtu: 23)
    _ = checkInvariants(result, message: Array(message.utf8), chunkLength: 20)
  }

  @Test func noDataChunkEverEqualsEOM() throws {
    for mtu in [23, 24, 25, 100, 517] {
      for prefix in 0..<70 {
        let message = asciiMessage(prefix) + "EOM"
        let chunker = try TransferChunker(message: message, attMTU: mtu)
        _ = checkInvariants(
          Array(chunker), message: Array(message.utf8), chunkLength: chunker.chunkLength)
      }
    }
  }

  @Test func multiByteCharactersMaySplitAcrossChunks() throws {
    // 3-byte characters against 20-byte chunks: characters straddle chunk boundaries.
    let message = String(repeating: "あ", count: 30) + "😀é"
    let result = try chunks(message, mtu: 23)
    let data = checkInvariants(result, message: Array(message.utf8), chunkLength: 20)
    #expect(data.contains { String(validating: $0, as: UTF8.self) == nil })
  }

  @Test func nextChunkStaysUntilMarkedSent() throws {
    var chunker = try TransferChunker(message: asciiMessage(45), attMTU: 23)
    let first = chunker.nextChunk
    #expect(chunker.nextChunk == first)  // transport full: try again later, same chunk
    chunker.markSent()
    #expect(chunker.bytesSent == 20)
    #expect(chunker.nextChunk?.count == 20)
    chunker.markSent()
    chunker.markSent()
    #expect(chunker.bytesSent == 45)
    #expect(!chunker.isFinished)
    #expect(chunker.nextChunk == Self.eom)
    chunker.markSent()
    #expect(chunker.isFinished)
    #expect(chunker.nextChunk == nil)
    chunker.markSent()  // harmless
    #expect(chunker.isFinished)
  }
}
