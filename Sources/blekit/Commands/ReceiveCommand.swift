// `blekit receive`: the central side of Apple's transfer sample on Linux.

import ArgumentParsing
import BLEKit
import Glibc
import JSON
import Synchronization

/// Finds a peripheral advertising the transfer service, receives its message, prints it.
struct ReceiveCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "receive",
    abstract: "Receive the transfer service's message from a peripheral and print it.",
    discussion: """
      Scans for a peripheral advertising the transfer service \
      (E20A39F4-73F5-4BC4-A12F-17D1AD07A961), connects, subscribes, and prints the message \
      once it is complete. Then it writes the --reply (if any) without response, unsubscribes \
      and disconnects. A message is bytes: when standard output is a file or a pipe it gets \
      exactly the message bytes, nothing added (receive > out is byte-exact, binary included); \
      on a terminal, text is shown with control characters made visible and a final newline, \
      and a message that is not UTF-8 is shown as hex. With --count N on a file or pipe, give \
      --json or --null so the messages stay apart. With a blekit peripheral the message travels \
      in sequenced, CRC-checked frames and arrives byte-exact even when BlueZ reorders \
      notifications. Any other peer sends the sample's plain chunks + EOM, which carry no \
      sequence numbers: receive then decides whether their order is guaranteed (bluetoothd \
      runs one ATT bearer, [GATT] Channels = 1 in its main.conf, or the peer's GATT server \
      does not offer EATT) and otherwise refuses before subscribing (exit 12) unless \
      --accept-unordered is given. A transfer cut before its end is an error (exit 7) that \
      says how many bytes arrived; partial data is never printed. --min-rssi is off by \
      default; an unknown RSSI (127, "not available") passes a threshold. On a terminal, \
      transfers longer than a second show progress on standard error. A message still \
      incomplete after --deadline (default 600 s), or that gains no byte for --idle-timeout \
      (default 15 s; empty or repeated values do not count), is cut (exit 7). --from ADDRESS|NAME \
      receives from that peripheral only: an address bluetoothd already knows is connected \
      without a scan.
      """
  )

  struct Arguments: ArgumentList {
    let adapter: Option<String> = .adapter()
    let minRSSI = Option<Int>(
      "--min-rssi", value: "DBM", help: "Ignore peripherals heard below this RSSI (-127...20).")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(30),
      help: "Give up finding and connecting after this long (default 30).")
    let reply = Option<String>(
      "--reply", value: "TEXT", help: "Write this reply back (without response) after the message.")
    let count = DefaultedOption<Int>(
      "--count", short: "n", value: "N", default: 1,
      help: "Receive N times, reconnecting each time, as the sample does (default 1).")
    let json = Flag(
      "--json",
      help: "Print one JSON object per line per message (not UTF-8: the message in base64).")
    let nul = Flag(
      "--null", short: "z", help: "Write a NUL byte after each message (for --count on a pipe).")
    let acceptUnordered = Flag(
      "--accept-unordered",
      help: "Print a plain peer's message even when its order is not guaranteed (with a warning).")
    let from = Option<String>(
      "--from", value: "ADDRESS|NAME",
      help: "Receive from this peripheral only (a known address connects without a scan).")
    let l2cap = Flag(
      "--l2cap", help: "Receive over the L2CAP channel of advertise --l2cap (PSM from GATT).")
    let deadline = DefaultedOption<Duration>(
      "--deadline", value: "SECONDS", default: TransferDeadlines.defaultDeadline,
      help: "Give up a message still incomplete after this long (default 600).")
    let idleTimeout = DefaultedOption<Duration>(
      "--idle-timeout", value: "SECONDS", default: TransferDeadlines.defaultIdleTimeout,
      help: "Give up a message that gains no byte for this long (default 15).")
  }

  let adapter: String?
  let rssi: RSSIFilter
  let timeout: Duration
  let reply: String?
  let count: Int
  let json: Bool
  let nul: Bool
  let acceptUnordered: Bool
  let from: PeripheralTarget?
  /// `--l2cap`: over an L2CAP channel (ReceiveL2CAP.swift).
  let l2cap: Bool
  /// `--deadline` and `--idle-timeout`: how long one message may take, in all and without
  /// progress.
  let deadlines: TransferDeadlines

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    from = try arguments.from.map { text throws(UsageError) in try parsePeripheralTarget(text) }
    if from != nil, arguments.minRSSI != nil {
      throw .invalid("--min-rssi filters the scan for any peer; drop it with --from")
    }
    adapter = arguments.adapter
    rssi = try parseRSSIFilter(arguments.minRSSI)
    guard arguments.timeout > .zero else { throw .invalid("--timeout must be more than 0 seconds") }
    timeout = arguments.timeout
    reply = arguments.reply
    guard arguments.count >= 1 else { throw .invalid("--count must be 1 or more") }
    count = arguments.count
    json = arguments.json
    nul = arguments.nul
    acceptUnordered = arguments.acceptUnordered
    if json && nul { throw .invalid("give --json or --null, not both") }
    l2cap = arguments.l2cap
    deadlines = try parseTransferDeadlines(
      deadline: arguments.deadline, idleTimeout: arguments.idleTimeout)
    if l2cap && (count != 1 || reply != nil || acceptUnordered) {
      throw .invalid("--l2cap receives one message: drop --count, --reply, --accept-unordered")
    }
  }

  func run() async throws {
    let toTerminal = StandardOutput.isTerminal
    if count > 1 && !json && !nul && !toTerminal {
      throw UsageError.invalid(
        "--count \(count) on a file or pipe needs --json (one object per line) or --null "
          + "(a NUL after each message) to keep the messages apart")
    }
    let manager = try await openPoweredCentral(adapter: adapter)
    do {
      if l2cap { try await receiveL2CAP(manager) } else { try await receiveAll(manager) }
    } catch {
      await manager.close()
      throw error
    }
    await manager.close()
  }

  private func receiveAll(_ manager: CentralManager) async throws {
    let central = TransferCentral(manager: manager)
    let showProgress = standardErrorIsTerminal && !json
    let warned = Mutex(false)
    for _ in 0..<count {
      let progress = ProgressLine(verb: "received", enabled: showProgress)
      var options = TransferCentral.Options(
        reply: reply, connectTimeout: timeout, idleTimeout: deadlines.idleTimeout,
        acceptUnordered: acceptUnordered)
      options.deadline = deadlines.deadline
      if showProgress {
        // Only where the line is drawn: each report wakes a task of the transfer's, which
        // cost 23% more instructions per received value when set for nothing
        // (bench-receive, 2026-12-06).
        options.progress = { bytes in progress.update(bytes, of: nil) }
      }
      let cpuAtSubscription = Mutex(Duration.zero)
      options.subscribed = { cpuAtSubscription.withLock { $0 = Self.processorTime() } }
      options.warning = { text in
        // Once per run, even with --count.
        if warned.withLock({ seen in
          defer { seen = true }
          return !seen
        }) {
          writeStandardError("blekit: \(text)\n")
        }
      }
      let received: TransferCentral.Received
      do {
        let peer: PeripheralIdentifier
        if let from {
          peer = try await manager.find(from, timeout: timeout)
        } else {
          peer = try await central.findPeer(rssi: rssi, timeout: timeout).peripheral
        }
        received = try await central.receive(from: peer, options: options)
      } catch let error as BluetoothError where error.code == .orderNotGuaranteed {
        progress.finish()
        throw CLIError(
          ExitStatusMapping.status(for: error.code),
          "\(error.message); nothing was received. Set Channels = 1 "
            + "in the [GATT] section of bluetoothd's main.conf (then restart bluetoothd), or "
            + "pass --accept-unordered to print it anyway")
      } catch {
        progress.finish()
        throw exitError(error)
      }
      progress.finish()
      if json {
        let cpu = Self.processorTime() - cpuAtSubscription.withLock { $0 }
        try StandardOutput.write(Array((Self.json(received, cpu: cpu).text + "\n").utf8))
      } else if nul {
        guard !received.bytes.contains(0) else {
          throw CLIError(
            .failure,
            "the message (\(received.byteCount) bytes) contains a NUL byte, which --null "
              + "cannot keep apart; use --json")
        }
        try StandardOutput.write(received.bytes + [0])
      } else {
        try StandardOutput.writePeerBytes(received.bytes)
      }
    }
  }

  /// One message as a JSON object. `message` is the text when the bytes are UTF-8
  /// (`"encoding":"utf-8"`), else their base64 (`"encoding":"base64"`). `cpuSeconds` is the
  /// process's CPU time (user and system, all threads) from the subscription until the receive
  /// returned: the transfer's span (`seconds`) plus the reply and the unsubscribing.
  static func json(_ received: TransferCentral.Received, cpu: Duration) -> JSONValue {
    let text = received.text
    return .object([
      .init("message", .string(text ?? Base64.encode(received.bytes))),
      .init("encoding", .string(text == nil ? "base64" : "utf-8")),
      .init("bytes", .int(received.byteCount)),
      .init("peer", .string(received.peripheral.address.rawValue)),
      .init("framing", .string(received.framing.rawValue)),
      .init("order", .string(received.order.name)),
      .init("orderReason", .string(received.order.reason)),
      .init("method", .string(Self.describe(received.method))),
      .init("seconds", .number(seconds(received.duration))),
      .init(
        "bytesPerSecond",
        .number(Double(received.byteCount) / max(seconds(received.duration), 0.001))
      ),
      .init("cpuSeconds", .number(seconds(cpu))),
      .init("framesOutOfOrder", .int(received.framesOutOfOrder)),
      .init("socketBacklogPeak", received.socketBacklogPeak.map { .int($0) } ?? .null),
    ])
  }

  /// The CPU time this process has used so far, all threads.
  static func processorTime() -> Duration {
    var now = timespec()
    Syscall.clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
  }

  static func describe(_ method: NotificationMethod) -> String {
    switch method {
    case .acquiredSocket: "acquire-notify"
    case .startNotify: "start-notify"
    }
  }
}
