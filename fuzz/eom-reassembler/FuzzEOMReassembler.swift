// libFuzzer target: the plain transfer's EOM reassembler, fed length-prefixed chunks, with a
// small size limit so the limit path is reached. Built by scripts/fuzz.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEOMReassembler(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  let limit = Int(input.byte()) * 4
  var reassembler = TransferReassembler(maximumMessageLength: limit)
  var expected: [UInt8] = []
  while !input.isAtEnd {
    // A zero length byte sends "EOM", so every input can end a message.
    var chunk = input.chunk()
    if chunk.isEmpty { chunk = TransferChunker.endOfMessage }
    let isEnd = chunk.elementsEqual(TransferChunker.endOfMessage)
    do {
      if let message = try reassembler.receive(chunk) {
        fuzzCheck(isEnd, "a message came out of a chunk that is not EOM")
        fuzzCheck(message == expected, "the message is not the bytes received")
        expected = []
      } else {
        fuzzCheck(!isEnd, "EOM gave no message and no error")
        expected += chunk
        fuzzCheck(reassembler.received == expected, "received bytes differ from the chunks")
        fuzzCheck(expected.count <= limit, "more than the limit was kept")
      }
    } catch {
      switch error {
      case .messageTooLarge:
        fuzzCheck(expected.count + chunk.count > limit, "messageTooLarge under the limit")
      default:
        fuzzCheck(false, "unexpected error \(error)")
      }
      expected = []
      fuzzCheck(reassembler.bytesReceived == 0, "the reassembler did not start afresh")
    }
  }
  _ = reassembler.incompleteError.description
  return 0
}
