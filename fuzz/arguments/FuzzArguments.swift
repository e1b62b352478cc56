// libFuzzer target: the argument parser (Sources/ArgumentParsing) over a small command tree
// shaped like blekit's (a root with a version, leaf commands, a nested group; flags, options
// of strings, integers, doubles, durations and choices, repeated options, required, optional
// and repeated positionals, a validation rule). The input is split at NUL bytes into words; a
// word starting with 0x01 is a token from the tree's vocabulary (the next byte picks it), one
// starting with 0x02 is a token, `=` and the rest of the word. Any command line either
// resolves or throws a UsageError (typed throws: anything else does not compile), and:
// - a command that parsed is written back as canonical words (`--name=value`, positionals
//   after `--`), which parse to the same values;
// - help is given only when asked for (or for a group named alone), and is not empty;
// - a usage error prints as exactly two lines: the message and the hint naming a command.
// Built by scripts/fuzz.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArguments(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  let words = argv(Array(UnsafeBufferPointer(start: start, count: count)))
  check(words)
  return 0
}

private func check(_ words: [String]) {
  do throws(UsageError) {
    switch try CommandResolver.resolve(words, root: Tool.self) {
    case .help(let text):
      fuzzCheck(text.contains("USAGE:"), "help without a usage line")
      let asked = words.prefix { $0 != "--" }.contains { $0 == "--help" || $0 == "-h" }
      fuzzCheck(asked || namesGroup(words), "help given unasked: \(words)")
    case .version(let line):
      fuzzCheck(words.first == "--version" && line == "tool 1.0", "version for \(words)")
    case .generated(let text):
      // A completion script or the manual page: only when the root was asked for one.
      let generators = ["--generate-completion-script", "--generate-manual"]
      fuzzCheck(
        words.contains { word in generators.contains { word.hasPrefix($0) } },
        "generated output unasked: \(words)")
      fuzzCheck(!text.isEmpty, "empty generated output for \(words)")
    case .run(let command, let path):
      guard let command = command as? any Canonical else {
        fuzzCheck(false, "resolved to a command outside the tree")
        return
      }
      fuzzCheck(path.first == "tool" && path.count >= 2, "run at path \(path)")
      let canonical = Array(path.dropFirst()) + command.words
      do throws(UsageError) {
        guard
          case .run(let again as any Canonical, let againPath) =
            try CommandResolver.resolve(canonical, root: Tool.self)
        else {
          fuzzCheck(false, "the canonical words \(canonical) did not resolve to a command")
          return
        }
        fuzzCheck(againPath == path, "the canonical words \(canonical) reached \(againPath)")
        fuzzCheck(
          again.summary == command.summary,
          "\(words) parsed as \(command.summary), its canonical words \(canonical) as \(again.summary)"
        )
      } catch {
        fuzzCheck(false, "the canonical words \(canonical) of \(words) were refused: \(error)")
      }
    }
  } catch {
    let lines = ErrorReport(error).lines(program: "tool")
    fuzzCheck(!error.message.isEmpty, "an empty usage error")
    fuzzCheck(
      lines.filter(\.isNewline).count == 2 && lines.hasSuffix("\n"),
      "a usage error is not two lines: \(lines.debugDescription)")
    fuzzCheck(error.commandPath.first == "tool", "a usage error without its command")
    fuzzCheck(ErrorReport(error).status == .usage, "a usage error with another status")
  }
}

/// Whether the words name a group and nothing after it (the group's help).
private func namesGroup(_ words: [String]) -> Bool {
  words.isEmpty || (words == ["gatt"])
}

// MARK: The input as words

private let vocabulary = [
  "scan", "advertise", "read", "gatt", "write", "run", "--", "-", "--help", "-h", "--version",
  "--adapter", "-a", "--service", "-s", "--min-rssi", "--json", "--duplicates", "-d",
  "--timeout", "-t", "--power", "on", "off", "--message", "-m", "--file", "--company",
  "--interval", "--once", "--text", "--raw", "--without-response", "--count", "-n", "-dj",
  "-a0", "-50", "0x10", "1.5s", "500ms", "2m", "-0x8", "=", "--adapter=", "--json=yes", "",
]

private func argv(_ bytes: [UInt8]) -> [String] {
  guard !bytes.isEmpty else { return [] }
  return bytes.split(separator: 0, omittingEmptySubsequences: false).map { word in
    let word = Array(word)
    if word.first == 1, word.count >= 2 {
      return vocabulary[Int(word[1]) % vocabulary.count]
    }
    if word.first == 2, word.count >= 2 {
      return vocabulary[Int(word[1]) % vocabulary.count] + "="
        + String(decoding: word.dropFirst(2), as: UTF8.self)
    }
    return String(decoding: word, as: UTF8.self)
  }
}

// MARK: The command tree

/// A command that can write its parsed values back as words.
protocol Canonical: ParsableCommand {
  /// Words that parse to the same values.
  var words: [String] { get }
  /// The values, for comparing.
  var summary: String { get }
}

/// `--name=value` for each value.
private func named<Value>(
  _ name: String, _ values: [Value],
  _ text: (Value) -> String = {
    "\($0)"
  }
) -> [String] {
  values.map { "\(name)=\(text($0))" }
}

private func flag(_ name: String, _ given: Bool) -> [String] { given ? [name] : [] }

/// A duration as seconds with every digit, and in whole microseconds for comparing (parsing
/// goes through a Double).
private func seconds(_ duration: Duration) -> String {
  let (whole, atto) = duration.components
  return "\(Double(whole) + Double(atto) / 1e18)"
}

private func micros(_ duration: Duration) -> Int64 {
  let (whole, atto) = duration.components
  return whole * 1_000_000
    + (atto / 1_000_000_000_000 + (atto % 1_000_000_000_000 >= 500_000_000_000 ? 1 : 0))
}

struct Tool: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "tool", abstract: "A command tree for the fuzzer.", version: "1.0",
    subcommands: [Scan.self, Advertise.self, Gatt.self, Run.self])
  init(parsing arguments: ParsedArguments<NoArguments>) throws(UsageError) {}
  func run() async throws {}
}

enum Power: String, CaseIterable, ExpressibleByArgument {
  case on, off
}

struct Scan: Canonical {
  static let configuration = CommandConfiguration(name: "scan", abstract: "Scan.")
  struct Arguments: ArgumentList {
    let adapter = Option<String>("--adapter", short: "a", value: "NAME", help: "Adapter.")
    let service = RepeatedOption<String>("--service", short: "s", value: "UUID", help: "UUID.")
    let minRSSI = Option<Int8>("--min-rssi", value: "DBM", help: "Weakest.")
    let json = Flag("--json", short: "j", help: "JSON.")
    let duplicates = Flag("--duplicates", short: "d", help: "Duplicates.")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(10), help: "Timeout.")
    let power = Option<Power>("--power", value: "STATE", help: "Power.")
  }
  let adapter: String?, services: [String], minRSSI: Int8?, json: Bool, duplicates: Bool
  let timeout: Duration, power: Power?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    adapter = arguments.adapter
    services = arguments.service
    minRSSI = arguments.minRSSI
    json = arguments.json
    duplicates = arguments.duplicates
    timeout = arguments.timeout
    power = arguments.power
    fuzzCheck(timeout >= .zero && timeout <= .seconds(1e9), "a timeout of \(timeout)")
  }
  func run() async throws {}

  var words: [String] {
    named("--adapter", adapter.map { [$0] } ?? []) + named("--service", services)
      + named("--min-rssi", minRSSI.map { [$0] } ?? []) + flag("--json", json)
      + flag("--duplicates", duplicates) + named("--timeout", [timeout], seconds)
      + named("--power", power.map { [$0.rawValue] } ?? [])
  }
  var summary: String {
    "\(String(reflecting: adapter)) \(services) \(String(describing: minRSSI)) \(json) \(duplicates) \(micros(timeout)) \(String(describing: power))"
  }
}

struct Advertise: Canonical {
  static let configuration = CommandConfiguration(name: "advertise", abstract: "Advertise.")
  struct Arguments: ArgumentList {
    let message = Option<String>("--message", short: "m", value: "TEXT", help: "Message.")
    let file = Option<String>("--file", value: "PATH", help: "File.")
    let company = Option<UInt16>("--company", value: "ID", help: "Company.")
    let interval = Option<Double>("--interval", value: "MS", help: "Interval.")
    let count = RepeatedOption<Int64>("--count", short: "n", value: "N", help: "Count.")
    let once = Flag("--once", help: "Once.")
  }
  let message: String?, file: String?, company: UInt16?, interval: Double?, counts: [Int64]
  let once: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    message = arguments.message
    file = arguments.file
    company = arguments.company
    interval = arguments.interval
    counts = arguments.count
    once = arguments.once
    guard (message == nil) != (file == nil) else {
      throw .invalid("give either --message or --file")
    }
    fuzzCheck(interval.map(\.isFinite) ?? true, "an interval of \(interval!)")
  }
  func run() async throws {}

  var words: [String] {
    named("--message", message.map { [$0] } ?? []) + named("--file", file.map { [$0] } ?? [])
      + named("--company", company.map { [$0] } ?? [])
      + named("--interval", interval.map { [$0] } ?? []) + named("--count", counts)
      + flag("--once", once)
  }
  var summary: String {
    "\(String(reflecting: message)) \(String(reflecting: file)) \(String(describing: company)) \(String(describing: interval)) \(counts) \(once)"
  }
}

struct Gatt: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "gatt", abstract: "GATT verbs.", subcommands: [Read.self, Write.self])
  init(parsing arguments: ParsedArguments<NoArguments>) throws(UsageError) {}
  func run() async throws {}
}

struct Read: Canonical {
  static let configuration = CommandConfiguration(name: "read", abstract: "Read.")
  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS", help: "Address.")
    let characteristic = Argument<String>("CHAR-UUID", help: "Characteristic.")
    let offset = OptionalArgument<UInt32>("OFFSET", help: "Offset.")
    let text = Flag("--text", help: "Text.")
    let raw = Flag("--raw", help: "Raw.")
    let adapter = Option<String>("--adapter", short: "a", value: "NAME", help: "Adapter.")
  }
  let address: String, characteristic: String, offset: UInt32?, text: Bool, raw: Bool
  let adapter: String?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    address = arguments.address
    characteristic = arguments.characteristic
    offset = arguments.offset
    text = arguments.text
    raw = arguments.raw
    adapter = arguments.adapter
    if text && raw { throw .invalid("give --text or --raw, not both") }
  }
  func run() async throws {}

  var words: [String] {
    flag("--text", text) + flag("--raw", raw) + named("--adapter", adapter.map { [$0] } ?? [])
      + ["--", address, characteristic] + (offset.map { ["\($0)"] } ?? [])
  }
  var summary: String {
    "\(address.debugDescription) \(characteristic.debugDescription) \(String(describing: offset)) \(text) \(raw) \(String(reflecting: adapter))"
  }
}

struct Write: Canonical {
  static let configuration = CommandConfiguration(name: "write", abstract: "Write.")
  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS", help: "Address.")
    let values = RepeatedArgument<UInt8>("BYTE", help: "Bytes.")
    let withoutResponse = Flag("--without-response", short: "w", help: "Command.")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "SECONDS", default: .milliseconds(1500), help: "Timeout.")
  }
  let address: String, values: [UInt8], withoutResponse: Bool, timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    address = arguments.address
    values = arguments.values
    withoutResponse = arguments.withoutResponse
    timeout = arguments.timeout
  }
  func run() async throws {}

  var words: [String] {
    flag("--without-response", withoutResponse) + named("--timeout", [timeout], seconds)
      + ["--", address] + values.map { "\($0)" }
  }
  var summary: String {
    "\(address.debugDescription) \(values) \(withoutResponse) \(micros(timeout))"
  }
}

struct Run: Canonical {
  static let configuration = CommandConfiguration(name: "run", abstract: "Run a command.")
  struct Arguments: ArgumentList {
    let verbose = Flag("--verbose", short: "v", help: "Verbose.")
    let command = RepeatedArgument<String>("COMMAND", help: "The command.")
  }
  let verbose: Bool, command: [String]

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    verbose = arguments.verbose
    command = arguments.command
  }
  func run() async throws {}

  var words: [String] { flag("--verbose", verbose) + ["--"] + command }
  var summary: String { "\(verbose) \(command.map(\.debugDescription))" }
}
