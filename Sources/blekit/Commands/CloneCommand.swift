// `blekit clone`: connect, read a device's whole GATT database and what bluetoothd knows of its
// advertisement, and write a `blekit serve` profile that stands up a twin of it.

import ArgumentParsing
import BLEKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a serve profile (docs/serve.md) copying a device's services and advertisement.
struct CloneCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "clone",
    abstract: "Read a device's GATT database and advertisement into a serve profile.",
    discussion: """
      Finds and connects to the device as explore does, walks every service, characteristic \
      and descriptor, reads every readable value, and takes the advertisement bluetoothd \
      knows for it (name, appearance, service UUIDs, manufacturer and service data). Writes \
      a profile for `blekit serve` to FILE (-o) or standard output: properties and security \
      flags as BlueZ shows them, each value as read, a notifier repeating that value every \
      second for a characteristic that notifies or indicates; with --listen SECONDS, what \
      each one notified in that time, replayed in a cycle at the mean interval. A read the device refused is \
      recorded as its ATT error (readError), which serve answers every read with. GAP \
      (1800) and GATT (1801), which bluetoothd serves itself, and the descriptors it adds \
      (2900, 2902) are left out, with a note in the profile; so is what does not fit a \
      legacy advertisement. The profile is checked as serve checks it before it is written. \
      See docs/serve.md, "Cloning a device".
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let output = Option<String>(
      "--output", short: "o", value: "FILE",
      help: "Write the profile to FILE instead of standard output.")
    let listen = Option<Duration>(
      "--listen", short: "l", value: "SECONDS",
      help: "Also record notifications this long; the twin replays them in a cycle.")
    let adapter: Option<String> = .adapter()
    let timeout: DefaultedOption<Duration> = .connectTimeout
  }

  let target: PeripheralTarget
  let output: String?
  let listen: Duration?
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    if let output = arguments.output, output.isEmpty {
      throw .invalid("--output needs a file name")
    }
    output = arguments.output
    if let listen = arguments.listen, listen <= .zero {
      throw .invalid("--listen must be more than 0 seconds")
    }
    listen = arguments.listen
    adapter = arguments.adapter
    timeout = arguments.timeout
    try checkTimeout(timeout)
  }

  func run() async throws {
    let report = ProgressReport()
    // A value that needs pairing makes bluetoothd try to pair, and a refused pairing drops
    // the link: connect again and go on, as explore does, so that value is cloned as refused.
    let walk = try await GattWalk.open(
      target, adapter: adapter, timeout: timeout, reads: .readable,
      reconnects: ExplorationReconnects(
        maximum: ExploreCommand.maximumReconnects, timeout: timeout),
      progress: report)
    let text: String
    do {
      var recorded: [String: [GattWalk.Heard]] = [:]
      if let listen {
        recorded = try await Self.record(walk, for: listen, report: report)
      }
      text = try await Self.profileText(of: walk.peripheral, tree: walk.tree, recorded: recorded)
      await walk.session.close()
    } catch {
      await walk.session.close()
      throw error
    }
    if let output {
      try Self.write(text + "\n", to: output)
      report("wrote \(output)")
    } else {
      printLine(text)
    }
  }

  /// The profile for a walked device, indented, checked by serve's decoder.
  static func profileText(
    of peripheral: Peripheral, tree: [ExploredService], recorded: [String: [GattWalk.Heard]] = [:]
  ) async throws -> String {
    let advertisement: PeripheralAdvertisement
    do {
      advertisement = try await peripheral.advertisement()
    } catch {
      throw exitError(error)
    }
    let source = peripheral.identifier.address.rawValue
    let profile = try CloneProfile(
      source: source, tree: tree, advertisement: advertisement, recorded: recorded
    ).profile()
    let text = profile.indentedText()
    // What serve would refuse is a mistake here, not a profile to hand out.
    do throws(ProfileError) {
      _ = try ServeProfile.decode(Array(text.utf8), file: "the clone of \(source)")
    } catch {
      throw CLIError(.failure, "cannot write a profile serve accepts: \(error.description)")
    }
    return text
  }

  /// The notifications of every notifying characteristic for `duration`, by
  /// ``CloneProfile/key(service:characteristic:)``; a subscription that fails is reported on
  /// standard error and the characteristic gets the usual notifier.
  static func record(_ walk: GattWalk, for duration: Duration, report: ProgressReport)
    async throws -> [String: [GattWalk.Heard]]
  {
    let recorded = Mutex<[String: [GattWalk.Heard]]>([:])
    try await GattWalk.listen(
      to: walk.tree, on: walk.peripheral, for: duration, report: report,
      subscribeFailed: { characteristic, error in
        writeStandardError(
          "blekit clone: cannot subscribe to \(uuidLabel(characteristic.uuid)): "
            + "\(TerminalText.visible(error.message))\n")
      },
      heard: { heard in
        recorded.withLock {
          let key = CloneProfile.key(service: heard.service, characteristic: heard.characteristic)
          if $0[key, default: []].count < ProfileDecoder.maximumCycleLength {
            $0[key, default: []].append(heard)
          }
        }
      })
    return recorded.withLock { $0 }
  }

  /// Writes `text` to `path` (created, or truncated), mode 0644 less the umask.
  static func write(_ text: String, to path: String) throws(CLIError) {
    let fd = Syscall.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else {
      throw CLIError(ExitStatusMapping.cloneOutput, "cannot create \(path): \(errnoText())")
    }
    defer { Syscall.close(fd) }
    let bytes = Array(text.utf8)
    var written = 0
    while written < bytes.count {
      let count = bytes[written...].withUnsafeBytes {
        Syscall.write(fd, $0.baseAddress, $0.count)
      }
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else {
        throw CLIError(ExitStatusMapping.cloneOutput, "cannot write \(path): \(errnoText())")
      }
      written += count
    }
  }
}
