// SequencedTransferDecoder: the receiver side of blekit's sequenced transfer framing (wire
// format in SequencedFrame.swift): buffers frames in any order, verifies, delivers.

/// Reassembles sequenced frames into verified messages, whatever order the frames arrive in.
///
/// Feed each notification value to `receive(_:)`; it returns a message once the message's end
/// frame and all its data frames are in, its length matches and its CRC-32 matches. Duplicate
/// frames are ignored, also late ones of a message already delivered. A thrown error concerns
/// one frame or one message (which is then dropped); the decoder stays usable.
public struct SequencedTransferDecoder: Sendable {
  /// A delivered, verified message.
  public struct Message: Hashable, Sendable {
    /// The message number from the frames.
    public let number: UInt8
    /// The message bytes.
    public let bytes: [UInt8]

    /// The message as text.
    ///
    /// - Throws: ``BluetoothError/Code/invalidUTF8`` when the bytes are not UTF-8.
    public func text() throws(BluetoothError) -> String {
      try UTF8Text.decode(bytes)
    }
  }

  /// How many messages may be incomplete at once before `receive` refuses a new one.
  public static let maximumMessagesInFlight = 4
  /// The least payload of a data frame other than a message's last (see the wire format).
  public static let minimumDataFramePayload = 16
  /// How many delivered or dropped message numbers are remembered, to ignore late frames.
  static let rememberedMessages = 16

  /// The largest message accepted.
  public let maximumMessageLength: Int
  /// How many duplicate or late frames were ignored.
  public private(set) var duplicatesIgnored = 0
  /// How many data frames arrived with a lower index than one received before them.
  public private(set) var framesOutOfOrder = 0

  private var assemblies: [UInt8: Assembly] = [:]
  private var finished: [UInt8] = []

  /// Creates a decoder.
  public init(maximumMessageLength: Int = TransferReassembler.defaultMaximumMessageLength) {
    self.maximumMessageLength = maximumMessageLength
  }

  /// Whether no message is partly received.
  public var isIdle: Bool { assemblies.isEmpty }

  /// Message bytes received so far in messages not yet delivered.
  public var bytesReceived: Int { assemblies.values.reduce(0) { $0 + $1.byteCount } }

  /// Data frames received so far in messages not yet delivered.
  public var framesReceived: Int { assemblies.values.reduce(0) { $0 + $1.payloads.count } }

  /// The error to report when the transfer stops with a message incomplete:
  /// ``BluetoothError/Code/transferInterrupted`` with the bytes and frames received.
  public var incompleteError: BluetoothError {
    .incomplete(bytesReceived: bytesReceived, chunksReceived: framesReceived)
  }

  /// Takes one notification value. Returns a message when this frame completed one.
  ///
  /// - Throws: ``BluetoothError/Code/malformedFrame`` / `.unsupportedVersion` for a bad frame;
  ///   `.lengthMismatch` / `.checksumMismatch` when a completed message fails verification
  ///   (the message is dropped); `.messageTooLarge`; `.tooManyMessagesInFlight`.
  public mutating func receive(_ value: some Collection<UInt8>) throws(BluetoothError) -> Message? {
    let frame = try SequencedFrame(parsing: value)
    let number = frame.message
    if finished.contains(number) {
      duplicatesIgnored += 1
      return nil
    }
    if assemblies[number] == nil, assemblies.count >= Self.maximumMessagesInFlight {
      throw .tooManyMessagesInFlight(limit: Self.maximumMessagesInFlight)
    }
    // Take the assembly out of the dictionary so that adding a frame does not copy it.
    var assembly = assemblies.removeValue(forKey: number) ?? Assembly()
    do throws(BluetoothError) {
      try assembly.add(frame, decoder: &self)
    } catch {
      drop(number)
      throw error
    }
    guard let bytes = assembly.completeBytes() else {
      assemblies[number] = assembly
      return nil
    }
    drop(number)
    let end = assembly.end!
    guard bytes.count == end.length else {
      throw .lengthMismatch(message: number, expected: end.length, actual: bytes.count)
    }
    let crc = CRC32.checksum(bytes)
    guard crc == end.crc else {
      throw .checksumMismatch(message: number, expected: end.crc, actual: crc)
    }
    return Message(number: number, bytes: bytes)
  }

  /// Drops every partly received message and forgets delivered ones.
  public mutating func reset() {
    assemblies = [:]
    finished = []
  }

  private mutating func drop(_ number: UInt8) {
    assemblies[number] = nil
    finished.append(number)
    if finished.count > Self.rememberedMessages { finished.removeFirst() }
  }

  /// The frames of one message received so far.
  private struct Assembly: Sendable {
    var payloads: [Int: [UInt8]] = [:]
    var byteCount = 0
    var highestIndex = -1
    var hasShortFrame = false
    var end: (count: Int, length: Int, crc: UInt32)?

    mutating func add(_ frame: SequencedFrame, decoder: inout SequencedTransferDecoder)
      throws(BluetoothError)
    {
      switch frame {
      case .data(let message, let sequence, let payload):
        let index = unwrap(sequence)
        guard index >= 0 else {
          throw .malformedFrame("data frame \(sequence) of message \(message) precedes frame 0")
        }
        if let end, index >= end.count {
          throw .malformedFrame(
            "data frame \(index) of message \(message) is past its end (\(end.count) frames)")
        }
        guard payloads[index] == nil else {
          decoder.duplicatesIgnored += 1
          return
        }
        // This message is out of the decoder's table while it is added to: count it apart.
        guard decoder.bytesReceived + byteCount + payload.count <= decoder.maximumMessageLength
        else {
          // Over all messages in flight together (so also per message).
          throw .messageTooLarge(limit: decoder.maximumMessageLength)
        }
        if payload.count < SequencedTransferDecoder.minimumDataFramePayload {
          guard !hasShortFrame else {
            throw .malformedFrame(
              "message \(message) has a second data frame shorter than "
                + "\(SequencedTransferDecoder.minimumDataFramePayload) bytes")
          }
          hasShortFrame = true
        }
        if index < highestIndex { decoder.framesOutOfOrder += 1 }
        payloads[index] = payload
        byteCount += payload.count
        highestIndex = max(highestIndex, index)
      case .end(let message, let count, let length, let crc):
        if let end {
          guard end.count == Int(count), end.length == Int(length), end.crc == crc else {
            throw .malformedFrame("two different end frames for message \(message)")
          }
          decoder.duplicatesIgnored += 1
          return
        }
        guard Int(length) <= decoder.maximumMessageLength else {
          throw .messageTooLarge(limit: decoder.maximumMessageLength)
        }
        guard highestIndex < Int(count) else {
          throw .malformedFrame(
            "end frame of message \(message) announces \(count) frames, frame \(highestIndex) "
              + "arrived")
        }
        end = (Int(count), Int(length), crc)
      }
    }

    /// The full frame index nearest the highest index seen that has these low 16 bits.
    func unwrap(_ sequence: UInt16) -> Int {
      let reference = max(highestIndex, 0)
      let delta = Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: reference))
      return reference + Int(delta)
    }

    /// The message bytes once the end frame and every data frame are in.
    func completeBytes() -> [UInt8]? {
      guard let end, payloads.count == end.count else { return nil }
      var bytes: [UInt8] = []
      bytes.reserveCapacity(byteCount)
      for index in 0..<end.count { bytes += payloads[index]! }
      return bytes
    }
  }
}
