// The protocol every command implements: declare, validate, run.

/// A command: its name and help, its arguments, validation, and the work it does.
///
/// Parsing and validation happen in `init(parsing:)`, before anything runs; a mistake there
/// is a ``UsageError`` (exit status 2). `run()` does the work; a failure there is best thrown
/// as a ``CLIError`` (or any ``ExitStatusError``) so it exits with the right status.
///
/// A command with subcommands is a group: it is never constructed or run; naming it alone
/// prints its help.
///
/// Adding a command is one file plus one line in the program's command registry:
///
/// ```swift
/// struct ReadCommand: ParsableCommand {
///   static let configuration = CommandConfiguration(
///     name: "read", abstract: "Read a characteristic's value and print it in hex.")
///
///   // Declared once: these drive parsing, validation of each value, and --help.
///   struct Arguments: ArgumentList {
///     let address = Argument<String>("ADDRESS", help: "The device's address or name.")
///     let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic.")
///     let adapter = Option<String>("--adapter", value: "NAME", help: "Use this adapter.")
///     let timeout = DefaultedOption<Duration>(
///       "--timeout", value: "DURATION", default: .seconds(10), help: "Give up after.")
///     let text = Flag("--text", help: "Print the value as UTF-8 text.")
///   }
///
///   let address: String, characteristic: String, adapter: String?
///   let timeout: Duration, text: Bool
///
///   init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
///     address = arguments.address  // String: required positional
///     characteristic = arguments.characteristic
///     adapter = arguments.adapter  // String?: absent is nil
///     timeout = arguments.timeout  // Duration: parsed and checked already
///     text = arguments.text  // Bool
///     if timeout == .zero { throw .invalid("--timeout must be more than 0") }
///   }
///
///   func run() async throws {
///     throw CLIError(.timedOut, "\(address) did not answer within \(timeout)")
///   }
/// }
/// ```
public protocol ParsableCommand: Sendable {
  /// The arguments the command accepts, declared once as stored properties.
  associatedtype Arguments: ArgumentList = NoArguments

  /// The name, one-line abstract, discussion and subcommands.
  static var configuration: CommandConfiguration { get }

  /// Reads and checks the parsed arguments; throws for combinations that make no sense.
  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError)

  /// Does the command's work.
  func run() async throws
}

extension ParsableCommand {
  /// The specs of the command's arguments, in declaration order.
  public static var argumentSpecs: [ArgumentSpec] { Arguments.specs }

  /// Parses the words after the command's name and validates them.
  public static func parse(_ words: [String]) throws(UsageError) -> Self {
    let values = try ArgumentParser(specs: argumentSpecs).parse(words)
    return try Self(parsing: ParsedArguments(values))
  }
}

/// A command's name and the text its help shows.
public struct CommandConfiguration: Sendable {
  /// The word that selects the command (`scan`); for the root, the program name.
  public var name: String
  /// One line, shown in the parent's command list and at the top of the help.
  public var abstract: String
  /// Paragraphs shown after the abstract in the command's own help.
  public var discussion: String
  /// The version printed by `--version`; only the root sets it.
  public var version: String?
  /// The subcommands, in the order help lists them; non-empty makes this a group.
  public var subcommands: [any ParsableCommand.Type]
  /// Extra sections at the end of the help, e.g. the exit status table.
  public var extraSections: [HelpSection]
  /// What argument values complete to in the completion scripts, by ``ArgumentSpec/id``
  /// (`--adapter`, `ADDRESS`), for the whole tree; only the root's is read. Values with a
  /// closed set of words complete to them without an entry here.
  public var valueCompletions: [String: ValueCompletion]
  /// Sections the manual page adds after the commands and the extra sections (ENVIRONMENT,
  /// FILES, EXAMPLES); only the root's are read.
  public var manualSections: [ManualSection]

  /// Describes a command.
  public init(
    name: String, abstract: String, discussion: String = "", version: String? = nil,
    subcommands: [any ParsableCommand.Type] = [], extraSections: [HelpSection] = [],
    valueCompletions: [String: ValueCompletion] = [:], manualSections: [ManualSection] = []
  ) {
    self.name = name
    self.abstract = abstract
    self.discussion = discussion
    self.version = version
    self.subcommands = subcommands
    self.extraSections = extraSections
    self.valueCompletions = valueCompletions
    self.manualSections = manualSections
  }
}

/// A titled list of label/text rows in help, laid out like OPTIONS.
public struct HelpSection: Sendable, Equatable {
  /// The heading without its colon, e.g. `EXIT STATUS`.
  public var title: String
  /// Rows of label and text.
  public var rows: [(label: String, text: String)]
  /// The manual page's longer text for a row's label (e.g. a status with the error codes that
  /// give it), where it has one; help shows ``rows`` as they are.
  public var manualText: [String: String]

  /// Creates a section.
  public init(
    title: String, rows: [(label: String, text: String)], manualText: [String: String] = [:]
  ) {
    self.title = title
    self.rows = rows
    self.manualText = manualText
  }

  public static func == (lhs: HelpSection, rhs: HelpSection) -> Bool {
    lhs.title == rhs.title && lhs.rows.elementsEqual(rhs.rows) { $0 == $1 }
      && lhs.manualText == rhs.manualText
  }
}
