// `blekit advertise`: serve the transfer service, send the message to each central that
// subscribes, print the replies they write.

import ArgumentParsing
import BLEKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The peripheral side of Apple's transfer sample on Linux.
struct AdvertiseCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "advertise",
    abstract: "Serve the transfer service and send a message to each central that subscribes.",
    discussion: """
      Publishes the transfer service (Apple's sample characteristic, plus blekit's sequenced \
      one) and advertises its UUID. Every central that subscribes gets the message: in \
      chunks of min(MTU - 3, 512) bytes then EOM, or in sequenced frames for a blekit \
      central. The plain chunks carry no sequence numbers, and no chunk is ever exactly \
      EOM; with EATT (several ATT bearers: BlueZ's [GATT] Channels above 1, the default of \
      5.66, on either side) a central may receive them out of order, which only the \
      sequenced framing can repair. --plain-only serves the sample's characteristic alone, \
      as Apple's sample peripheral does. A reply written by a central is printed on standard \
      output (one line each) and becomes the message for the next subscriber, as in the \
      sample. Ctrl-C or SIGTERM unregisters everything before exiting. --pairable registers \
      blekit's pairing agent as the default one: --confirm prompt asks on the terminal, \
      --allow ADDRESS accepts only the devices named (others are refused), --confirm auto \
      accepts any device; without a terminal one of --confirm or --allow is required (exit 2 \
      otherwise). Each decision is logged on standard error; AuthorizeService is granted only \
      for the services served here. The agent is NoInputNoOutput ("just works") with \
      --confirm auto alone, else DisplayYesNo, so that Linux asks it about every pairing; \
      without --confirm prompt a passkey comparison is refused (an automatic yes would have \
      the key recorded as protected against a man in the middle): --allow checks an \
      address, which any device can show. A send to one central is given up after \
      --deadline (default 600 s) or --idle-timeout without progress (default 15 s). \
      --manufacturer and --service-data add fields to \
      the advertisement (--no-service-uuid leaves the service UUID out to make room); so do \
      --appearance and --include-tx-power (the TX power field bluetoothd fills in). The size \
      is checked before bluetoothd is asked (exit 9 with a breakdown), against the adapter's \
      MaxAdvLen when bluetoothd reports it (BlueZ 5.66: only with --experimental) and the \
      31-byte legacy limit otherwise. --secondary-channel asks for extended advertising on \
      that PHY (the adapter must list it: see blekit adapters). --min-interval, \
      --max-interval and --tx-power are requests: bluetoothd applies an interval only with \
      both ends given, a TX power only where the adapter lists CanSetTxPower, and BlueZ 5.66 \
      reads none of them without --experimental (5.82 does); a warning on standard error \
      names each one bluetoothd would ignore, decided from what the adapter's advertising \
      manager exposes. --read-value or --read-clock adds blekit's read service, whose \
      characteristic's value is produced at each read (offsets honoured, long values read \
      in pieces).
      """
  )

  struct Arguments: ArgumentList {
    let message = Option<String>("--message", short: "m", value: "TEXT", help: "The message.")
    let file = Option<String>("--file", value: "PATH", help: "Send this file's bytes instead.")
    let name = Option<String>(
      "--name", value: "NAME", help: "Local name to advertise (in the scan response).")
    let adapter: Option<String> = .adapter(example: "hci1")
    let once = Flag("--once", help: "Exit after the first complete send (and its reply).")
    let timeout = Option<Duration>(
      "--timeout", value: "SECONDS", help: "Stop after this long (exit 6 if nothing was sent).")
    let manufacturer = RepeatedOption<String>(
      "--manufacturer", value: "ID:HEX",
      help: "Advertise manufacturer data, e.g. 0xFFFF:0210... (bytes after the company ID).")
    let serviceData = RepeatedOption<String>(
      "--service-data", value: "UUID:HEX", help: "Advertise service data, e.g. 180f:64.")
    let appearance = Option<UInt16>(
      "--appearance", value: "VALUE", help: "Advertise this GAP appearance, e.g. 0x0340.")
    let includeTxPower = Flag(
      "--include-tx-power", help: "Include the TX power field (filled in by bluetoothd).")
    let txPower = Option<Int>(
      "--tx-power", value: "DBM", help: "Request this TX power, -127...20 (BlueZ 5.66: needs -E).")
    let minInterval = Option<Int>(
      "--min-interval", value: "MS", help: "Shortest advertising interval, ms (5.66: needs -E).")
    let maxInterval = Option<Int>(
      "--max-interval", value: "MS", help: "Longest advertising interval, ms (5.66: needs -E).")
    let secondaryChannel = Option<String>(
      "--secondary-channel", value: "PHY",
      help: "Extended advertising on 1M, 2M or Coded (see blekit adapters).")
    let noServiceUUID = Flag(
      "--no-service-uuid", help: "Leave the transfer service UUID out of the advertisement.")
    let readValue = Option<String>(
      "--read-value", value: "TEXT", help: "Add a readable characteristic holding TEXT.")
    let readClock = Flag(
      "--read-clock", help: "Add a readable characteristic holding the time of each read.")
    let pairable = Flag(
      "--pairable", help: "Register a pairing agent (the default one) so centrals can pair.")
    let confirm = Option<ConfirmPolicy>(
      "--confirm", value: "POLICY",
      help: "With --pairable: auto accepts by itself, prompt asks (default on a terminal).")
    let allow = RepeatedOption<String>(
      "--allow", value: "ADDRESS",
      help: "With --pairable: pair only with this device; others are refused.")
    let secure = Flag(
      "--secure",
      help: "Subscribing, replying and reading --read-value/--read-clock need a paired link.")
    let plainOnly = Flag(
      "--plain-only",
      help: "Serve only the sample's characteristic (chunks + EOM), as Apple's sample does.")
    let l2cap = Flag(
      "--l2cap", help: "Send the message over an L2CAP channel (receive --l2cap) instead.")
    let deadline = DefaultedOption<Duration>(
      "--deadline", value: "SECONDS", default: TransferDeadlines.defaultDeadline,
      help: "Give up a send to one central after this long (default 600).")
    let idleTimeout = DefaultedOption<Duration>(
      "--idle-timeout", value: "SECONDS", default: TransferDeadlines.defaultIdleTimeout,
      help: "Give up a send that makes no progress for this long (default 15).")
  }

  /// What the dynamic read characteristic answers.
  enum ReadSource: Sendable {
    case text(String)
    case clock
  }

  enum Source: Sendable {
    case text(String)
    case file(String)
  }

  let source: Source
  let name: String?
  let adapter: String?
  let once: Bool
  let timeout: Duration?
  let payload: AdvertisingPayload
  /// `--tx-power`, requested from bluetoothd.
  let txPower: Int16?
  let readSource: ReadSource?
  /// The pairing agent's policy, with `--pairable`.
  let pairing: PairingPolicy?
  let secure: Bool
  let plainOnly: Bool
  /// `--l2cap`: the message over an L2CAP channel (AdvertiseL2CAP.swift).
  let l2cap: Bool
  /// `--deadline` and `--idle-timeout`: how long one central's send may take, in all and
  /// without progress.
  let deadlines: TransferDeadlines

  /// How long `--once` waits for the central to unsubscribe after the last value went out.
  static let onceGrace: Duration = .seconds(10)
  /// How long `--once` still takes a reply after the central unsubscribed.
  static let replyGrace: Duration = .seconds(1)
  /// How long a released advertisement waits for the supervision to explain it (bluetoothd
  /// stopping, a power-off) before it counts as bluetoothd dropping it.
  static let releaseGrace: Duration = PeripheralManager.powerOffGrace + .seconds(5)

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    switch (arguments.message, arguments.file) {
    case (let text?, nil): source = .text(text)
    case (nil, let path?): source = .file(path)
    case (.some, .some): throw .invalid("give either --message or --file, not both")
    case (nil, nil): throw .invalid("give the message with --message TEXT or --file PATH")
    }
    if let timeout = arguments.timeout, timeout <= .zero {
      throw .invalid("--timeout must be more than 0 seconds")
    }
    name = arguments.name
    plainOnly = arguments.plainOnly
    l2cap = arguments.l2cap
    if l2cap && (plainOnly || arguments.readValue != nil || arguments.readClock) {
      throw .invalid("--l2cap sends over a channel: drop --plain-only, --read-value, --read-clock")
    }
    adapter = arguments.adapter
    once = arguments.once
    timeout = arguments.timeout
    deadlines = try parseTransferDeadlines(
      deadline: arguments.deadline, idleTimeout: arguments.idleTimeout)
    secure = arguments.secure
    var manufacturerData: [UInt16: [UInt8]] = [:]
    for value in arguments.manufacturer {
      let (key, bytes) = try Self.keyAndBytes(value, option: "--manufacturer")
      guard let company = try? UInt16(argument: key) else {
        throw .invalid("--manufacturer: '\(key)' is not a company ID (e.g. 0xFFFF)")
      }
      guard manufacturerData[company] == nil else {
        throw .invalid("--manufacturer: company \(HexBytes.companyID(company)) given twice")
      }
      manufacturerData[company] = bytes
    }
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
    for value in arguments.serviceData {
      let (key, bytes) = try Self.keyAndBytes(value, option: "--service-data")
      let uuid = try parseServiceUUIDs([key])[0]
      guard serviceData[uuid] == nil else {
        throw .invalid("--service-data: service \(key) given twice")
      }
      serviceData[uuid] = bytes
    }
    if let power = arguments.txPower, !(-127...20).contains(power) {
      throw .invalid("--tx-power must be within -127...20 dBm")
    }
    txPower = arguments.txPower.map(Int16.init)
    for (option, value) in [
      ("--min-interval", arguments.minInterval), ("--max-interval", arguments.maxInterval),
    ] {
      // The HCI range: 0x20 to 0xFFFFFF units of 0.625 ms.
      if let value, !(20...10_485_759).contains(value) {
        throw .invalid("\(option) must be within 20...10485759 ms")
      }
    }
    if let low = arguments.minInterval, let high = arguments.maxInterval, low > high {
      throw .invalid("--min-interval must not exceed --max-interval")
    }
    var channel: AdvertisingPayload.SecondaryChannel?
    if let text = arguments.secondaryChannel {
      guard
        let parsed = AdvertisingPayload.SecondaryChannel.allCases.first(where: {
          $0.rawValue.lowercased() == text.lowercased()
        })
      else { throw .invalid("--secondary-channel must be 1M, 2M or Coded") }
      channel = parsed
    }
    // General discoverable (Flags 0x06), as TransferPeripheral.publish advertises.
    payload = AdvertisingPayload(
      discoverable: true,
      serviceUUIDs: arguments.noServiceUUID ? [] : [BlekitUUID.transferService],
      manufacturerData: manufacturerData, serviceData: serviceData, localName: name,
      appearance: arguments.appearance, includesTxPower: arguments.includeTxPower,
      secondaryChannel: channel, minInterval: arguments.minInterval.map { .milliseconds($0) },
      maxInterval: arguments.maxInterval.map { .milliseconds($0) })
    switch (arguments.readValue, arguments.readClock) {
    case (let text?, false):
      guard text.utf8.count <= 512 else {
        throw .invalid(
          "--read-value: \(text.utf8.count) bytes; an attribute value holds at most 512")
      }
      readSource = .text(text)
    case (nil, true): readSource = .clock
    case (nil, false): readSource = nil
    case (.some, true): throw .invalid("give either --read-value or --read-clock, not both")
    }
    if arguments.pairable {
      // AuthorizeService is granted only for what this command serves.
      var served: Set<BluetoothUUID> = [BlekitUUID.transferService]
      if readSource != nil { served.insert(BlekitUUID.readService) }
      pairing = try pairingPolicy(
        confirm: arguments.confirm, allowed: try allowedDevices(arguments.allow), served: served,
        missing: "--pairable without a terminal needs a policy: --confirm auto (any device) "
          + "or --allow ADDRESS (only that device)")
    } else {
      guard arguments.confirm == nil, arguments.allow.isEmpty else {
        throw .invalid("--confirm and --allow go with --pairable")
      }
      pairing = nil
    }
  }

  /// Splits `KEY:HEX` at its last colon-free key (`0xFFFF:0210..`, `180f:64`; the 128-bit
  /// UUID form has dashes, not colons).
  static func keyAndBytes(_ value: String, option: String) throws(UsageError)
    -> (String, [UInt8])
  {
    guard let colon = value.firstIndex(of: ":") else {
      throw .invalid("\(option): '\(value)' is not KEY:HEX")
    }
    let key = String(value[..<colon])
    do {
      return (key, try HexBytes.parse(String(value[value.index(after: colon)...])))
    } catch {
      throw .invalid("\(option): \(error.description)")
    }
  }

  func run() async throws {
    let bytes: [UInt8]
    switch source {
    case .text(let text): bytes = Array(text.utf8)
    case .file(let path): bytes = try readFile(path)
    }
    if l2cap { return try await runL2CAP(bytes) }
    let manager: PeripheralManager
    do {
      manager = try await PeripheralManager.open(adapter: adapter)
    } catch {
      throw exitError(error)
    }
    // Before anything is registered: an advertisement that cannot fit fails here, with its
    // sizes, against the adapter's limit.
    do {
      let limit = try await manager.advertisingCapabilities().advertisingDataLimit
      _ = try payload.validateLegacySize(limit: limit)
    } catch {
      await manager.close()
      throw exitError(error)
    }
    var agent: PairingAgent?
    if let pairing {
      do {
        agent = try await registerPairableAgent(manager, policy: pairing)
      } catch {
        await manager.close()
        throw error
      }
    }
    let transfer = TransferPeripheral(
      manager: manager, message: bytes, requireEncryption: secure, sequenced: !plainOnly,
      deadlines: deadlines)
    let report = StatusReport()
    let faults = AdvertiseFaults()
    let outcome: Outcome
    do {
      try await manager.add(transfer.service)
      if let readSource {
        try await manager.add(Self.readService(readSource, secure: secure).service)
      }
      // Requests bluetoothd would drop silently, decided from what the adapter's
      // LEAdvertisingManager1 exposes (BlueZ 5.66 without --experimental drops all three).
      if txPower != nil || payload.minInterval != nil || payload.maxInterval != nil,
        let capabilities = try? await manager.advertisingCapabilities()
      {
        for sentence in capabilities.ignoredRequests(
          txPower: txPower, minInterval: payload.minInterval, maxInterval: payload.maxInterval)
        {
          writeStandardError("blekit: warning: \(sentence)\n")
        }
      }
      try await manager.startAdvertising(payload, txPower: txPower)
      let supervision = try await manager.supervise(returnWithin: AdvertiseFaults.returnWithin)
      let watcher = Task { [agent] in
        await faults.follow(supervision, manager: manager, agent: agent)
      }
      defer { watcher.cancel() }
      report.line(
        "advertising the transfer service on \(manager.adapterName); waiting for a central")
      outcome = await serve(transfer, report: report, faults: faults)
    } catch {
      await agent?.unregister()
      await manager.close()
      throw exitError(error)
    }
    await agent?.unregister()
    await manager.close()
    if let ending = faults.ending { throw ending }
    if Task.isCancelled { throw CancellationError() }
    if outcome.advertisingStopped && outcome.completedSends == 0 {
      throw CLIError(.remoteError, "bluetoothd stopped the advertisement")
    }
    if outcome.timedOut && outcome.completedSends == 0 {
      throw CLIError(.timedOut, "no central received the message in time")
    }
  }

  struct Outcome {
    var completedSends = 0
    var timedOut = false
    var advertisingStopped = false
  }

  /// Handles transfer events until `--once` is satisfied, the timeout passes, or Ctrl-C.
  private func serve(
    _ transfer: TransferPeripheral, report: StatusReport, faults: AdvertiseFaults
  ) async -> Outcome {
    let manager = transfer.manager
    var outcome = Outcome()
    var timers: [Task<Void, Never>] = []
    let timedOut = SharedFlag()
    let released = SharedFlag()
    if let timeout {
      timers.append(
        Task {
          try? await Task.sleep(for: timeout)
          guard !Task.isCancelled else { return }
          timedOut.set()
          await manager.close()
        })
    }
    let progress = ProgressLine(verb: "sent", enabled: report.isTerminal)
    for await event in transfer.serve() {
      switch event {
      case .subscribed(let framing, let central, let length):
        report.line(
          "\(central?.description ?? "a central") subscribed (\(framing.rawValue)); "
            + "sending \(length) bytes")
        progress.restart()
      case .progress(_, let sent, let total):
        progress.update(sent, of: total)
      case .sent(let framing, let count, let duration):
        progress.finish()
        outcome.completedSends += 1
        report.line("sent \(count) bytes (\(framing.rawValue)) in \(format(duration))")
        if once {
          timers.append(
            Task {
              try? await Task.sleep(for: Self.onceGrace)
              guard !Task.isCancelled else { return }
              await manager.close()
            })
        }
      case .cut(let framing, let sent, let total):
        progress.finish()
        report.line("the central left after \(sent) of \(total) bytes (\(framing.rawValue))")
      case .timedOut(let framing, let sent, let total, let expiry):
        progress.finish()
        report.line(
          "gave up sending after \(sent) of \(total) bytes (\(framing.rawValue)): \(expiry)")
      case .unsubscribed(let framing, let central):
        report.line("\(central?.description ?? "the central") unsubscribed (\(framing.rawValue))")
        if once && outcome.completedSends > 0 {
          // bluetoothd hands a central's writes over D-Bus and its unsubscription through the
          // notification socket, two paths with no order between them: a reply the central
          // wrote just before it unsubscribed can still be on its way (a Write Command sent
          // before the CCC write can reach us after the unsubscription).
          timers.append(
            Task {
              try? await Task.sleep(for: Self.replyGrace)
              guard !Task.isCancelled else { return }
              await manager.close()
            })
        }
      case .reply(let value, _):
        progress.finish()
        // A peer's bytes: exact on a file or pipe; on a terminal, controls made visible.
        writeStandardOutput(
          StandardOutput.isTerminal
            ? Array((TerminalText.visible(String(decoding: value, as: UTF8.self)) + "\n").utf8)
            : value + [UInt8(ascii: "\n")])
      case .advertisingStopped:
        // bluetoothd also releases it as it stops or powers off: the supervision decides then.
        let stops = faults.stops
        timers.append(
          Task {
            try? await Task.sleep(for: Self.releaseGrace)
            guard !Task.isCancelled, faults.isQuiet, faults.stops == stops else { return }
            released.set()
            await manager.close()
          })
      }
    }
    progress.finish()
    for timer in timers { timer.cancel() }
    outcome.timedOut = timedOut.isSet
    outcome.advertisingStopped = released.isSet
    if released.isSet { report.line("bluetoothd stopped the advertisement") }
    return outcome
  }
}

extension AdvertiseCommand {
  /// blekit's read service for `--read-value` or `--read-clock`.
  /// With `secure` its characteristic is encrypt-read (`advertise --secure`).
  static func readService(_ source: ReadSource, secure: Bool = false) -> DynamicReadService {
    switch source {
    case .text(let text):
      let bytes = Array(text.utf8)
      return DynamicReadService(requireEncryption: secure) { bytes }
    case .clock:
      return DynamicReadService(requireEncryption: secure) { Array(utcTimestamp().utf8) }
    }
  }
}

/// The current time as ISO 8601 UTC with milliseconds, e.g. `2026-11-29T18:30:05.123Z`.
func utcTimestamp() -> String {
  var spec = timespec()
  Syscall.clock_gettime(CLOCK_REALTIME, &spec)
  var parts = tm()
  var seconds = spec.tv_sec
  gmtime_r(&seconds, &parts)
  func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
  let millis = Int(spec.tv_nsec / 1_000_000)
  let milliText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
  return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
    + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(milliText)Z"
}

/// Status lines on standard error, only when it is a terminal (piped runs stay quiet).
private struct StatusReport {
  let isTerminal = Syscall.isatty(STDERR_FILENO) == 1

  func line(_ text: String) {
    guard isTerminal else { return }
    writeStandardError("\(text)\n")
  }
}

/// A one-way flag shared with a timer task.
private final class SharedFlag: Sendable {
  private let value = Mutex(false)
  func set() { value.withLock { $0 = true } }
  var isSet: Bool { value.withLock { $0 } }
}

private func oneDecimal(_ value: Double) -> String {
  let tenths = Int((value * 10).rounded())
  return "\(tenths / 10).\(tenths % 10)"
}

private func format(_ duration: Duration) -> String {
  let milliseconds =
    duration.components.seconds * 1000
    + duration.components.attoseconds / 1_000_000_000_000_000
  return milliseconds < 1000 ? "\(milliseconds) ms" : "\(oneDecimal(Double(milliseconds) / 1000)) s"
}

/// Reads a whole file of at most `limit` bytes (a transfer message's limit, the same on both
/// sides); a longer one (or an endless one, /dev/zero) is a usage error, said before anything
/// is registered.
private func readFile(
  _ path: String, limit: Int = TransferReassembler.defaultMaximumMessageLength
) throws -> [UInt8] {
  let fd = Syscall.open(path, O_RDONLY | O_CLOEXEC)
  guard fd >= 0 else {
    throw CLIError(.failure, "cannot open \(path): \(String(cString: strerror(errno)))")
  }
  defer { Syscall.close(fd) }
  var result: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = buffer.withUnsafeMutableBytes { Syscall.read(fd, $0.baseAddress, $0.count) }
    if count < 0 && errno == EINTR { continue }
    guard count >= 0 else {
      throw CLIError(.failure, "cannot read \(path): \(String(cString: strerror(errno)))")
    }
    if count == 0 { return result }
    guard result.count + count <= limit else {
      throw UsageError.invalid(
        "--file: \(path) holds more than \(limit) bytes (16 MiB), the most one transfer message "
          + "holds (receivers refuse more)")
    }
    result += buffer[..<count]
  }
}
