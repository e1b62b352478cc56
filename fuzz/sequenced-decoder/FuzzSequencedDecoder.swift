// libFuzzer target: blekit's sequenced transfer decoder. Mode 0 feeds arbitrary frames
// (length-prefixed); mode 1 encodes a message from the input, then delivers its frames in an
// input-chosen order with duplicates, and the decoder must return exactly that message.
// Built by scripts/fuzz.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSequencedDecoder(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  let mode = input.byte()
  if mode & 1 == 0 {
    arbitraryFrames(&input, limit: Int(input.byte()) * 16)
  } else {
    shuffledMessage(&input, number: mode >> 1)
  }
  return 0
}

/// Any bytes as frames: errors are fine, traps are not; delivered messages pass their checks.
private func arbitraryFrames(_ input: inout FuzzInput, limit: Int) {
  var decoder = SequencedTransferDecoder(maximumMessageLength: limit)
  while !input.isAtEnd {
    let frame = input.chunk()
    if let parsed = try? SequencedFrame(parsing: frame) {
      fuzzCheck(parsed.bytes == frame, "a parsed frame does not re-encode to its bytes")
    }
    if let message = try? decoder.receive(frame) {
      fuzzCheck(message.bytes.count <= limit, "a message above the limit was delivered")
    }
    fuzzCheck(
      decoder.bytesReceived <= limit,
      "more bytes buffered than the limit allows")
  }
  _ = decoder.incompleteError
}

/// A real message, frames shuffled and duplicated: delivered once, byte-exact.
private func shuffledMessage(_ input: inout FuzzInput, number: UInt8) {
  let frameLength = SequencedTransferEncoder.minimumFrameLength + Int(input.byte()) % 24
  let length = Int(input.byte()) | Int(input.byte()) << 8
  let message = input.take(length)
  guard
    let encoder = try? SequencedTransferEncoder(
      bytes: message, maximumFrameLength: frameLength, messageNumber: number)
  else {
    fuzzCheck(false, "the encoder refused a frame length of \(frameLength)")
    return
  }
  var frames = Array(encoder)
  // An input-driven shuffle with duplicates: each step swaps or repeats a frame.
  while !input.isAtEnd, !frames.isEmpty {
    let a = Int(input.byte()) % frames.count
    let b = Int(input.byte()) % frames.count
    if input.byte() & 1 == 0 { frames.swapAt(a, b) } else { frames.insert(frames[a], at: b) }
  }
  var decoder = SequencedTransferDecoder()
  var delivered: [[UInt8]] = []
  for frame in frames {
    do {
      if let result = try decoder.receive(frame) { delivered.append(result.bytes) }
    } catch {
      fuzzCheck(false, "a valid, shuffled frame was refused: \(error)")
    }
  }
  fuzzCheck(delivered == [message], "delivered \(delivered.count) messages, not the one sent")
  fuzzCheck(decoder.isIdle, "the decoder still holds a partial message")
}
