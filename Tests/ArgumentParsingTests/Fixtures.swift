// Commands shaped like the ones later issues add (scan, write, monitor), for the tests.

import ArgumentParsing

enum Power: String, CaseIterable, ExpressibleByArgument {
  case on, off
}

/// Shaped like `blekit scan`: repeatable option, negative number, flags, defaults.
struct ScanFixture: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "scan", abstract: "Scan for advertising devices.",
    discussion: "Shows each device once per second at most.")

  struct Arguments: ArgumentList {
    let service = RepeatedOption<String>(
      "--service", short: "s", value: "UUID", help: "Only devices advertising UUID.")
    let minRSSI = Option<Int>("--min-rssi", value: "DBM", help: "Ignore weaker signals.")
    let name = Option<String>("--name", value: "TEXT", help: "Only names containing TEXT.")
    let duplicates = Flag("--duplicates", short: "d", help: "Report every advertisement.")
    let json = Flag("--json", short: "j", help: "Print JSON Lines.")
    let timeout = DefaultedOption<Duration>(
      "--timeout", short: "t", value: "DURATION", default: .seconds(10), help: "Stop after.")
    let power = Option<Power>("--power", value: "STATE", help: "Power the adapter.")
  }

  var services: [String]
  var minRSSI: Int?
  var name: String?
  var duplicates: Bool
  var json: Bool
  var timeout: Duration
  var power: Power?

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    services = arguments.service
    minRSSI = arguments.minRSSI
    name = arguments.name
    duplicates = arguments.duplicates
    json = arguments.json
    timeout = arguments.timeout
    power = arguments.power
    if let minRSSI, !(-127...20).contains(minRSSI) {
      throw .invalid("--min-rssi must be between -127 and 20 dBm")
    }
  }

  func run() async throws {}
}

/// Shaped like `blekit write ADDRESS CHAR-UUID [HEX] [--text T] [--without-response]`.
struct WriteFixture: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "write", abstract: "Write a characteristic's value.")

  struct Arguments: ArgumentList {
    let address = Argument<String>("ADDRESS", help: "The device's address or name.")
    let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic.")
    let hex = OptionalArgument<String>("HEX", help: "The value in hexadecimal.")
    let text = Option<String>("--text", value: "TEXT", help: "Write TEXT as UTF-8 instead.")
    let withoutResponse = Flag("--without-response", help: "Write without response.")
  }

  var address: String
  var characteristic: String
  var hex: String?
  var text: String?
  var withoutResponse: Bool

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    address = arguments.address
    characteristic = arguments.characteristic
    hex = arguments.hex
    text = arguments.text
    withoutResponse = arguments.withoutResponse
    if (hex == nil) == (text == nil) { throw .invalid("give either HEX or --text") }
  }

  func run() async throws {}
}

/// A command whose run() fails with a chosen error, to check the reported status.
struct FailFixture: ParsableCommand {
  static let configuration = CommandConfiguration(name: "fail", abstract: "Fail on purpose.")

  struct Arguments: ArgumentList {
    let kind = Argument<String>("KIND", help: "cli, cancel, other or none.")
  }

  struct Opaque: Error {}

  var kind: String

  init(parsing arguments: ParsedArguments<Arguments>) {
    kind = arguments.kind
  }

  func run() async throws {
    switch kind {
    case "cli": throw CLIError(.adapterNotFound, "adapter hci7 not found")
    case "cancel": throw CancellationError()
    case "other": throw Opaque()
    case "usage": throw UsageError.invalid("bad combination")
    default: break
    }
  }
}

/// A nested group, to check paths through more than one level.
struct GroupFixture: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "gatt", abstract: "GATT verbs.", subcommands: [WriteFixture.self])
  init(parsing _: ParsedArguments<NoArguments>) {}
  func run() async throws {}
}

struct RootFixture: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "tool", abstract: "A test tool.", version: "9.8.7",
    subcommands: [ScanFixture.self, WriteFixture.self, FailFixture.self, GroupFixture.self],
    extraSections: [ExitStatus.helpSection],
    valueCompletions: [
      "ADDRESS": .shellCommand("echo 00:AA:01:01:00:01"), "--name": .files,
      "KIND": .words(["cli", "cancel", "other", "none"]),
    ],
    manualSections: [
      ManualSection(
        title: "ENVIRONMENT", blocks: [.item("TOOL_HOME", "Where the tool keeps its state.")]),
      ManualSection(
        title: "EXAMPLES",
        blocks: [
          .paragraph("Write a value:"),
          .example("$ tool write 00:AA:01:01:00:01 2a00 ff\n.hidden line\n\\backslash"),
        ]),
    ])
  init(parsing _: ParsedArguments<NoArguments>) {}
  func run() async throws {}
}

/// Parses `words` as the scan fixture, through the resolver as the program would.
func parseScan(_ words: [String]) throws(UsageError) -> ScanFixture {
  try ScanFixture.parse(words)
}

/// The usage error `body` throws, or `nil` if it succeeds.
func usageError<T>(_ body: () throws(UsageError) -> T) -> UsageError? {
  do {
    _ = try body()
    return nil
  } catch {
    return error
  }
}

/// Swift Testing has its own `ExitStatus` (for exit tests); the tests mean ours.
typealias ExitStatus = ArgumentParsing.ExitStatus
