import BLEKit
import Testing

@Suite struct SequencedTransferTests {
  func frames(_ bytes: [UInt8], mtu: Int = 517, number: UInt8 = 0) throws -> [[UInt8]] {
    Array(try SequencedTransferEncoder(bytes: bytes, attMTU: mtu, messageNumber: number))
  }

  /// Feeds frames; returns every delivered message and the index of the frame that delivered.
  func deliver(_ frames: [[UInt8]], into decoder: inout SequencedTransferDecoder) throws
    -> [(index: Int, message: SequencedTransferDecoder.Message)]
  {
    var delivered: [(Int, SequencedTransferDecoder.Message)] = []
    for (index, frame) in frames.enumerated() {
      if let message = try decoder.receive(frame) { delivered.append((index, message)) }
    }
    return delivered
  }

  @Test func crc32CheckValue() {
    #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    #expect(CRC32.checksum([]) == 0)
    var incremental = CRC32()
    incremental.update(Array("1234".utf8))
    incremental.update(Array("56789".utf8))
    #expect(incremental.value == 0xCBF4_3926)
  }

  @Test func wireFormatOfDataAndEndFrames() throws {
    let all = try frames(Array("hello".utf8), mtu: 23, number: 7)
    #expect(all.count == 2)
    #expect(all[0] == [0x01, 0x07, 0x00, 0x00] + Array("hello".utf8))
    let crc = CRC32.checksum(Array("hello".utf8))
    #expect(
      all[1] == [0x81, 0x07, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00]
        + (0..<4).map { UInt8(truncatingIfNeeded: crc >> (8 * $0)) })
    #expect(
      try SequencedFrame(parsing: all[1])
        == .end(message: 7, frameCount: 1, length: 5, crc: crc))
  }

  @Test(arguments: [23, 517])
  func framesNeverExceedTheValueLimit(mtu: Int) throws {
    let limit = try TransferLimits.maximumValueLength(forATTMTU: mtu)
    let all = try frames(Array(asciiMessage(10_000).utf8), mtu: mtu)
    #expect(all.allSatisfy { $0.count <= limit })
    // Every data frame but the last is full.
    #expect(all.dropLast(2).allSatisfy { $0.count == limit })
  }

  @Test(arguments: [0, 1, 507, 508, 509, 3 * 508 + 1, 64 << 10, 256 << 10])
  func roundTripsInOrder(size: Int) throws {
    let message = Array(asciiMessage(size).utf8)
    var decoder = SequencedTransferDecoder()
    let all = try frames(message)
    #expect(all.count == (size + 507) / 508 + 1)
    let delivered = try deliver(all, into: &decoder)
    #expect(delivered.count == 1)
    #expect(delivered.first?.index == all.count - 1)
    #expect(delivered.first?.message.bytes == message)
    #expect(decoder.isIdle)
    #expect(decoder.framesOutOfOrder == 0)
  }

  @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
  func roundTripsUnderRandomPermutations(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed)
    let text = String(repeating: "日本語😀 EOM ", count: 3000)  // ~60 KB, multi-byte
    var all = try frames(Array(text.utf8), mtu: [23, 185, 517][Int(seed % 3)])
    all.shuffle(using: &random)
    var decoder = SequencedTransferDecoder()
    let delivered = try deliver(all, into: &decoder)
    #expect(delivered.count == 1)
    #expect(delivered.first?.index == all.count - 1)  // only once everything is in
    #expect(try delivered.first?.message.text() == text)
    #expect(decoder.framesOutOfOrder > 0)
  }

  @Test func duplicateFramesAreIgnored() throws {
    var random = SeededGenerator(seed: 42)
    let message = Array(asciiMessage(5000).utf8)
    var all = try frames(message, mtu: 23)
    let duplicates = (0..<40).map { _ in all.randomElement(using: &random)! }
    all += duplicates
    all.shuffle(using: &random)
    var decoder = SequencedTransferDecoder()
    let delivered = try deliver(all, into: &decoder)
    #expect(delivered.count == 1)
    #expect(delivered.first?.message.bytes == message)
    #expect(decoder.duplicatesIgnored > 0)
    // Late duplicates of a delivered message are ignored too, not a new message.
    for frame in duplicates { #expect(try decoder.receive(frame) == nil) }
    #expect(decoder.isIdle)
  }

  @Test func missingFrameLeavesTheMessageIncomplete() throws {
    let message = Array(asciiMessage(1000).utf8)
    var all = try frames(message, mtu: 23)  // 16 bytes per frame
    all.remove(at: 10)
    var decoder = SequencedTransferDecoder()
    #expect(try deliver(all, into: &decoder).isEmpty)
    #expect(!decoder.isIdle)
    #expect(decoder.bytesReceived == 1000 - 16)
    #expect(
      decoder.incompleteError
        == .incomplete(bytesReceived: 1000 - 16, chunksReceived: (1000 + 15) / 16 - 1))
  }

  @Test func missingEndFrameLeavesTheMessageIncomplete() throws {
    var decoder = SequencedTransferDecoder()
    #expect(try deliver(try frames([1, 2, 3]).dropLast(), into: &decoder).isEmpty)
    #expect(decoder.bytesReceived == 3)
  }

  @Test func corruptedPayloadFailsTheCRC() throws {
    let message = Array(asciiMessage(2000).utf8)
    var all = try frames(message, mtu: 185)
    all[3][50] ^= 0x01
    var decoder = SequencedTransferDecoder()
    #expect {
      _ = try deliver(all, into: &decoder)
    } throws: { error in
      guard let error = error as? BluetoothError, error.code == .checksumMismatch,
        error.messageNumber == 0, let checksums = error.checksums
      else { return false }
      return checksums.expected == CRC32.checksum(message) && checksums.actual != checksums.expected
    }
    #expect(decoder.isIdle)  // the corrupt message was dropped
  }

  @Test func wrongAnnouncedLengthIsDetected() throws {
    var all = try frames(Array("hello".utf8))
    all[1][8] = 6  // length field of the end frame
    var decoder = SequencedTransferDecoder()
    #expect(throws: BluetoothError.lengthMismatch(message: 0, expected: 6, actual: 5)) {
      _ = try deliver(all, into: &decoder)
    }
  }

  @Test func emptyMessageIsALoneEndFrame() throws {
    let all = try frames([])
    #expect(all.count == 1)
    var decoder = SequencedTransferDecoder()
    let delivered = try deliver(all, into: &decoder)
    #expect(delivered.first?.message.bytes == [])
    #expect(try delivered.first?.message.text() == "")
  }

  @Test func sequenceNumbersWrapAround() throws {
    // 20-byte frames (MTU 23) carry 16 bytes: 70,000 frames wrap the 16-bit sequence number.
    var random = SeededGenerator(seed: 9)
    let message = random.bytes(70_000 * 16)
    let encoder = try SequencedTransferEncoder(bytes: message, maximumFrameLength: 20)
    #expect(encoder.dataFrameCount == 70_000)
    var all = Array(encoder)
    // Reorder locally, as EATT bearers do: shuffle within windows of 64 frames.
    for start in stride(from: 0, to: all.count, by: 64) {
      all[start..<min(start + 64, all.count)].shuffle(using: &random)
    }
    var decoder = SequencedTransferDecoder()
    let delivered = try deliver(all, into: &decoder)
    #expect(delivered.count == 1)
    #expect(delivered.first?.message.bytes == message)
  }

  @Test func interleavedMessagesAreKeptApart() throws {
    let first = try frames(Array("first message".utf8), mtu: 23, number: 0)
    let second = try frames(Array("second message".utf8), mtu: 23, number: 1)
    var mixed: [[UInt8]] = []
    for index in 0..<max(first.count, second.count) {
      if index < second.count { mixed.append(second[index]) }
      if index < first.count { mixed.append(first[index]) }
    }
    var decoder = SequencedTransferDecoder()
    let delivered = try deliver(mixed, into: &decoder).map { try $0.message.text() }
    #expect(Set(delivered) == ["first message", "second message"])
  }

  @Test func tooManyMessagesInFlight() throws {
    var decoder = SequencedTransferDecoder()
    for number in 0..<UInt8(SequencedTransferDecoder.maximumMessagesInFlight) {
      _ = try decoder.receive(try frames([1, 2, 3], number: number)[0])
    }
    #expect(throws: BluetoothError.tooManyMessagesInFlight(limit: 4)) {
      try decoder.receive(try frames([1, 2, 3], number: 99)[0])
    }
  }

  @Test func dataFrameBeyondTheEndIsMalformed() throws {
    let all = try frames(Array(asciiMessage(40).utf8), mtu: 23)  // 3 data frames + end
    var decoder = SequencedTransferDecoder()
    _ = try decoder.receive(all[3])  // end: 3 frames
    let stray = SequencedFrame.data(message: 0, sequence: 5, payload: [1]).bytes
    #expect(throws: BluetoothError.self) { try decoder.receive(stray) }
  }

  @Test func enforcesTheSizeLimit() throws {
    var decoder = SequencedTransferDecoder(maximumMessageLength: 100)
    #expect(throws: BluetoothError.messageTooLarge(limit: 100)) {
      _ = try deliver(try frames(Array(asciiMessage(200).utf8)), into: &decoder)
    }
  }

  @Test(
    arguments: [
      ([], "shorter"), ([0x01, 0x00, 0x00], "shorter"), ([0x01, 0x00, 0x00, 0x00], "no payload"),
      ([0x81, 0x00, 0x00, 0x00, 0x00], "not 16"), ([0x11, 0x00, 0x00, 0x00, 0x61], "reserved"),
      ([0x81, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "disagrees"),
    ] as [([UInt8], String)])
  func malformedFramesAreRejected(bytes: [UInt8], reason: String) {
    #expect {
      try SequencedFrame(parsing: bytes)
    } throws: { error in
      guard let error = error as? BluetoothError, error.code == .malformedFrame else {
        return false
      }
      return error.message.contains(reason)
    }
  }

  @Test func otherVersionsAreRejected() {
    #expect(throws: BluetoothError.unsupportedVersion(2)) {
      try SequencedFrame(parsing: [0x02, 0x00, 0x00, 0x00, 0x61])
    }
    // The plain protocol's EOM is not a frame either.
    #expect(throws: BluetoothError.self) { try SequencedFrame(parsing: Array("EOM".utf8)) }
  }

  @Test func garbageNeverCrashesTheDecoder() {
    var random = SeededGenerator(seed: 2024)
    var decoder = SequencedTransferDecoder()
    var delivered = 0
    var deliveredEmpty = 0
    for round in 0..<20_000 {
      var value = random.bytes(Int.random(in: 0...40, using: &random))
      // Mostly well-formed headers with small message and sequence numbers, to reach the
      // reassembly paths, not only the header checks.
      if round % 4 != 0, value.count >= 4 {
        value[0] = Bool.random(using: &random) ? 0x01 : 0x81
        value[1] %= 8
        value[3] = 0
        if value[0] == 0x81, value.count >= 16 {
          value = Array(value.prefix(16))
          value[4] = value[2]
          value[5...7] = [0, 0, 0]
          value[8] %= 64
          value[9...11] = [0, 0, 0]
        }
      }
      if let message = try? decoder.receive(value) {
        delivered += 1
        if message.bytes.isEmpty { deliveredEmpty += 1 }
      }
    }
    // The well-formed headers reached reassembly (duplicates in so small a number space).
    #expect(decoder.duplicatesIgnored > 0)
    // Random bodies may complete a message only when its CRC matches: empty messages.
    #expect(delivered == deliveredEmpty)
  }

  @Test func encoderWaitsForMarkSent() throws {
    var encoder = try SequencedTransferEncoder(message: "abc", attMTU: 23)
    let first = encoder.nextFrame
    #expect(encoder.nextFrame == first)
    encoder.markSent()
    #expect(encoder.framesSent == 1)
    #expect(encoder.bytesSent == 3)
    guard case .end(0, 1, 3, _)? = encoder.nextFrame else {
      Issue.record("expected the end frame")
      return
    }
    encoder.markSent()
    #expect(encoder.isFinished)
    #expect(encoder.nextFrame == nil)
  }

  @Test func rejectsBadFrameLengths() {
    #expect(throws: BluetoothError.self) {
      try SequencedTransferEncoder(bytes: [1], maximumFrameLength: 19)
    }
    #expect(throws: BluetoothError.self) {
      try SequencedTransferEncoder(bytes: [1], maximumFrameLength: 513)
    }
    #expect(throws: BluetoothError.mtuTooSmall(20)) {
      try SequencedTransferEncoder(bytes: [1], attMTU: 20)
    }
  }
}

@Suite struct SequencedDecoderBoundsTests {
  @Test func aSecondShortDataFrameIsRefused() throws {
    var decoder = SequencedTransferDecoder()
    #expect(
      try decoder.receive(SequencedFrame.data(message: 0, sequence: 0, payload: [1]).bytes) == nil)
    #expect(throws: BluetoothError.self) {
      try decoder.receive(SequencedFrame.data(message: 0, sequence: 1, payload: [2]).bytes)
    }
    // Full-size frames of another message are still taken.
    let sixteen = [UInt8](repeating: 7, count: 16)
    #expect(
      try decoder.receive(SequencedFrame.data(message: 1, sequence: 0, payload: sixteen).bytes)
        == nil)
  }

  @Test func bytesInFlightAreBoundedOverAllMessages() throws {
    var decoder = SequencedTransferDecoder(maximumMessageLength: 40)
    let twenty = [UInt8](repeating: 1, count: 20)
    _ = try decoder.receive(SequencedFrame.data(message: 0, sequence: 0, payload: twenty).bytes)
    _ = try decoder.receive(SequencedFrame.data(message: 1, sequence: 0, payload: twenty).bytes)
    #expect(throws: BluetoothError.messageTooLarge(limit: 40)) {
      try decoder.receive(SequencedFrame.data(message: 2, sequence: 0, payload: twenty).bytes)
    }
  }

  @Test func everyEncodedMessageStillDecodesAtTheSmallestMTU() throws {
    for length in [0, 1, 15, 16, 17, 33, 1000] {
      let message = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
      var encoder = try SequencedTransferEncoder(bytes: message, attMTU: 23)
      var decoder = SequencedTransferDecoder()
      var delivered: [UInt8]?
      while let frame = encoder.nextFrame {
        encoder.markSent()
        if let done = try decoder.receive(frame.bytes) { delivered = done.bytes }
      }
      #expect(delivered == message, "length \(length)")
    }
  }
}
