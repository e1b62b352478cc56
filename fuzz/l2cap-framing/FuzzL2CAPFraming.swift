// libFuzzer target: blekit's L2CAP message framing (header, window, acknowledgement, and the
// assembler a receiver feeds with the peer's SDUs). Mode 0 feeds arbitrary SDUs (length-
// prefixed), the first as the header; mode 1 frames a message from the input, cuts it into
// input-chosen SDU sizes, and the assembler must return exactly that message, while a copy with
// one byte changed must fail its CRC-32. Built by scripts/fuzz.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzL2CAPFraming(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  let mode = input.byte()
  if mode & 1 == 0 {
    arbitrarySDUs(&input, limit: Int(input.byte()) << Int(mode >> 1 & 31))
  } else {
    framedMessage(&input)
  }
  return 0
}

/// Any bytes as SDUs: errors are fine, traps are not. Memory follows the bytes that arrived,
/// whatever the header announces; a message returned has the announced length and CRC-32.
private func arbitrarySDUs(_ input: inout FuzzInput, limit: Int) {
  let first = input.chunk()
  if let header = try? L2CAPMessageHeader(bytes: first) {
    fuzzCheck(header.bytes == first, "a parsed header does not re-encode to its bytes")
  }
  for sdu in [first, input.chunk()] {
    if let window = L2CAPMessageWindow(bytes: sdu) {
      fuzzCheck(window.bytes == sdu, "a parsed window does not re-encode to its bytes")
    }
    if let acknowledgement = L2CAPMessageAcknowledgement(bytes: sdu) {
      fuzzCheck(acknowledgement.bytes == sdu, "a parsed answer does not re-encode to its bytes")
    }
  }
  guard var assembler = try? L2CAPMessageAssembler(headerSDU: first, limit: limit) else { return }
  fuzzCheck(assembler.header.length <= limit, "a header above the limit was accepted")
  // A 13-byte header must not reserve what it announces (up to 16 MiB in blekit).
  fuzzCheck(assembler.bytes.capacity <= 64, "the header reserved \(assembler.bytes.capacity) bytes")
  while !input.isAtEnd {
    let sdu = input.chunk()
    let before = assembler.received
    do {
      try assembler.append(sdu)
      fuzzCheck(assembler.received == before + sdu.count, "an SDU was not taken whole")
    } catch {
      fuzzCheck(assembler.received == before, "a refused SDU was partly taken")
    }
    fuzzCheck(assembler.received <= assembler.header.length, "more bytes than announced")
    fuzzCheck(
      assembler.bytes.capacity <= max(64, 2 * assembler.received + 64),
      "\(assembler.bytes.capacity) bytes reserved for \(assembler.received) received")
  }
  if let message = try? assembler.verified() {
    fuzzCheck(message.count == assembler.header.length, "a message of the wrong length passed")
    fuzzCheck(CRC32.checksum(message) == assembler.header.checksum, "a corrupt message passed")
  }
}

/// A real message in SDUs of input-chosen sizes: assembled byte-exact; one byte changed fails.
private func framedMessage(_ input: inout FuzzInput) {
  let sduLength = 1 + Int(input.byte())
  let length = Int(input.byte()) | Int(input.byte()) << 8
  let message = input.take(length)
  let header = L2CAPMessageHeader(for: message)
  fuzzCheck(header.bytes.count == L2CAPMessageHeader.size, "the header is not 13 bytes")
  let flip = input.isAtEnd || message.isEmpty ? nil : Int(input.byte()) % message.count
  for corrupt in [false, true] {
    if corrupt && flip == nil { break }
    var sent = message
    if corrupt, let flip { sent[flip] ^= 0x5A }
    guard var assembler = try? L2CAPMessageAssembler(headerSDU: header.bytes, limit: 1 << 16)
    else {
      fuzzCheck(false, "our own header was refused")
      return
    }
    var offset = 0
    while offset < sent.count {
      let end = min(offset + sduLength, sent.count)
      do {
        try assembler.append(Array(sent[offset..<end]))
      } catch {
        fuzzCheck(false, "an SDU of our own message was refused: \(error)")
      }
      offset = end
    }
    fuzzCheck(assembler.isComplete, "all the bytes arrived and the message is not complete")
    let result = try? assembler.verified()
    if corrupt {
      fuzzCheck(result == nil, "a message with a changed byte passed its CRC-32")
    } else {
      fuzzCheck(result == message, "the message did not come back byte-exact")
    }
  }
}
