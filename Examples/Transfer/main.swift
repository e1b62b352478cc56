/// Both ends of the transfer service. `send` serves the bytes of its standard input to each
/// central that subscribes; `receive` finds a peripheral serving them, receives the message and
/// writes it to standard output, byte for byte.
///
///     swift run example-transfer send [--adapter hci1] [--count 1] < message
///     swift run example-transfer receive [--adapter hci0] [--timeout 30] > message
///
/// `send` exits after `--count` complete sends (`--count 0`: never); `receive` gives up when no
/// peer is found within `--timeout` seconds. Progress goes to standard error. Ctrl-C
/// unregisters (send) or unsubscribes and disconnects (receive), then exits.
import BLEKit
import Dispatch

#if canImport(Glibc)
  import Glibc
#endif

/// The value after `name` on the command line, if given.
func option(_ name: String) -> String? {
  let arguments = CommandLine.arguments
  guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
  return arguments[index + 1]
}
/// Writes a line to standard error.
func log(_ line: String) {
  var text = line + "\n"
  text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Serves standard input's bytes until `count` sends are complete (0: until Ctrl-C).
func send(adapter: String, count: Int) async throws {
  var message: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while case let length = read(0, &buffer, buffer.count), length > 0 {
    message += buffer[..<length]
  }
  let manager = try await PeripheralManager.open(adapter: adapter)
  do {
    let transfer = TransferPeripheral(manager: manager, message: message)
    try await transfer.publish(localName: "blekit transfer")
    log("serving \(message.count) bytes on \(adapter)")
    var sends = 0
    events: for await event in transfer.serve() {
      switch event {
      case .subscribed(let framing, let central, let length):
        log("\(central?.description ?? "a central") subscribed (\(framing)), \(length) bytes")
      case .sent(let framing, let bytes, let duration):
        log("sent \(bytes) bytes (\(framing)) in \(duration)")
        sends += 1
      case .cut(_, let sent, let total):
        log("the central left after \(sent) of \(total) bytes")
      case .timedOut(_, let sent, let total, let expiry):
        log("gave up after \(sent) of \(total) bytes: \(expiry)")
      case .unsubscribed:
        if count > 0 && sends >= count { break events }
      case .reply(let bytes, _):
        log("reply: \(String(decoding: bytes, as: UTF8.self))")
      case .progress, .advertisingStopped:
        continue
      }
    }
  } catch {
    await manager.close()
    throw error
  }
  await manager.close()  // also after Ctrl-C: close() finishes in a cancelled task
}

/// Receives one message and writes it to standard output.
func receive(adapter: String, timeout: Int) async throws {
  let central = try await CentralManager.open(adapter: adapter)
  try await central.waitUntilPoweredOn(timeout: .seconds(5))
  let transfer = TransferCentral(manager: central)
  let peer = try await transfer.findPeer(timeout: .seconds(timeout))
  log("found \(peer.address)")
  // Connects, subscribes, receives, then unsubscribes and disconnects whatever happens.
  let received = try await transfer.receive(from: peer.peripheral)
  var written = 0
  while written < received.bytes.count {
    let result = received.bytes[written...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    guard result > 0 else { throw BluetoothError(.system, "cannot write to standard output") }
    written += result
  }
  log(
    "received \(received.byteCount) bytes (\(received.framing)) in \(received.duration): "
      + received.order.reason)
}

let mode = CommandLine.arguments.dropFirst().first ?? ""
let count = option("--count").flatMap { Int($0) } ?? 1
let timeout = option("--timeout").flatMap { Int($0) } ?? 30
let work = Task {
  switch mode {
  case "send": try await send(adapter: option("--adapter") ?? "hci1", count: count)
  case "receive": try await receive(adapter: option("--adapter") ?? "hci0", timeout: timeout)
  default:
    log("usage: example-transfer send|receive [--adapter NAME] [--count N] [--timeout S]")
    exit(2)
  }
}

// Ctrl-C cancels the work, which cleans up on its way out.
// The handler runs on the main queue: written in top-level code, it belongs to the main actor.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { [work] in work.cancel() }
interrupt.resume()

let result = await work.result
if work.isCancelled { exit(130) }
if case .failure(let error) = result {
  log("error: \(error)")
  exit(1)
}
