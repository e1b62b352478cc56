// The commands under a root, flattened in help order, for the generators of scripts and pages.

/// Every command reachable from a root, each with the path that reaches it, in the order
/// help lists them (a group before its subcommands). Completion scripts and the manual page
/// are built from this walk, so a command or argument added to the tree appears in them
/// without being listed again.
public struct CommandTree: Sendable {
  /// One command in the tree.
  public struct Node: Sendable {
    /// The words that reach it, the program name first: `["blekit", "scan"]`.
    public let path: [String]
    /// The command type.
    public let command: any ParsableCommand.Type

    /// The command's configuration.
    public var configuration: CommandConfiguration { command.configuration }
    /// The command's argument specs, in declaration order.
    public var specs: [ArgumentSpec] { command.argumentSpecs }
    /// Whether the command is a group (it has subcommands and no arguments of its own).
    public var isGroup: Bool { !configuration.subcommands.isEmpty }
    /// The names of its subcommands, in help order.
    public var subcommandNames: [String] { configuration.subcommands.map { $0.configuration.name } }
    /// The path without the program name, joined by spaces: `""` for the root, `"scan"`.
    public var key: String { path.dropFirst().joined(separator: " ") }
  }

  /// The root command.
  public let root: any ParsableCommand.Type
  /// Every command, the root first, each group before its subcommands.
  public let nodes: [Node]

  /// Walks the tree under `root`.
  public init(root: any ParsableCommand.Type) {
    self.root = root
    var nodes: [Node] = []
    func visit(_ command: any ParsableCommand.Type, path: [String]) {
      nodes.append(Node(path: path, command: command))
      for subcommand in command.configuration.subcommands {
        visit(subcommand, path: path + [subcommand.configuration.name])
      }
    }
    visit(root, path: [root.configuration.name])
    self.nodes = nodes
  }

  /// The program name.
  public var programName: String { root.configuration.name }

  /// The options the framework gives `node` (``BuiltInOption/options(for:isRoot:)``).
  public func builtInOptions(of node: Node) -> [BuiltInOption] {
    BuiltInOption.options(for: node.configuration, isRoot: node.path.count == 1)
  }

  /// What a value of `spec` completes to: its type's words, else the root's mapping for its
  /// id, else nothing.
  public func valueCompletion(for spec: ArgumentSpec) -> ValueCompletion? {
    if let choices = spec.choices { return .words(choices) }
    return root.configuration.valueCompletions[spec.id]
  }

  /// The distinct shell pipelines used by ``valueCompletion(for:)`` anywhere in the tree, in
  /// the order first met, so each script defines one function per pipeline.
  public var shellCommands: [String] {
    var seen: [String] = []
    for node in nodes {
      for spec in node.specs {
        if case .shellCommand(let command) = valueCompletion(for: spec), !seen.contains(command) {
          seen.append(command)
        }
      }
    }
    return seen
  }
}

/// An option the framework gives a command, not declared by the command itself.
public struct BuiltInOption: Sendable {
  /// The names, short first: `["-h", "--help"]`.
  public let names: [String]
  /// The value's placeholder, or `nil` for a flag.
  public let valueName: String?
  /// The help line.
  public let help: String
  /// The accepted words, if the value is one of a closed set.
  public let choices: [String]?

  init(names: [String], valueName: String? = nil, help: String, choices: [String]? = nil) {
    self.names = names
    self.valueName = valueName
    self.help = help
    self.choices = choices
  }

  /// The options every command accepts from the framework, as `--help` lists them: `--help`
  /// everywhere; at a root with a version also `--version` and the two generators.
  public static func options(
    for configuration: CommandConfiguration, isRoot: Bool
  ) -> [BuiltInOption] {
    var options: [BuiltInOption] = []
    if isRoot && configuration.version != nil {
      options.append(BuiltInOption(names: ["--version"], help: "Show the version."))
      options.append(
        BuiltInOption(
          names: [CommandResolver.completionScriptOption], valueName: "SHELL",
          help: "Print a completion script for this shell.",
          choices: CompletionShell.allCases.map(\.rawValue)))
      options.append(
        BuiltInOption(
          names: [CommandResolver.manualOption], help: "Print the manual page (roff)."))
    }
    options.append(BuiltInOption(names: ["-h", "--help"], help: "Show help information."))
    return options
  }
}
