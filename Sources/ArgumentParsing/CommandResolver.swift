// Walks from the root command through subcommand names to what the command line asks for.

/// What a command line asks for, once resolved.
public enum Invocation: Sendable {
  /// Print this help text on standard output and exit 0.
  case help(String)
  /// Print this version line on standard output and exit 0.
  case version(String)
  /// Run this parsed, validated command, reached by `path` (e.g. `["blekit", "scan"]`).
  case run(any ParsableCommand, path: [String])
}

/// Resolves a command line (without the program name) against a tree of commands.
///
/// In a group, the first word must be a subcommand name, `--help`/`-h`, or (at a root with a
/// version) `--version`; naming a group alone prints its help. In a leaf command, `--help` or
/// `-h` anywhere before `--` prints its help, whatever else is on the line; otherwise the
/// words are parsed and validated. Errors carry the path of the command they were found in,
/// for the hint line.
public enum CommandResolver {
  /// Resolves `words` starting at `root`.
  public static func resolve(
    _ words: [String], root: any ParsableCommand.Type
  ) throws(UsageError) -> Invocation {
    var command = root
    var path = [root.configuration.name]
    var rest = words[...]
    while true {
      let configuration = command.configuration
      let specs = command.argumentSpecs
      let mistakes = problems(in: specs)
      precondition(
        mistakes.isEmpty,
        "command '\(path.joined(separator: " "))': " + mistakes.joined(separator: "; "))
      let isGroup = !configuration.subcommands.isEmpty
      // In a group only the first word counts: `blekit scan --help` is scan's help.
      let helpWords = isGroup ? Array(rest.prefix(1)) : Array(rest.prefix { $0 != "--" })
      if helpWords.contains("--help") || helpWords.contains("-h") {
        return .help(HelpFormatter.help(for: command, path: path))
      }
      if let version = configuration.version, rest.first == "--version" {
        return .version("\(configuration.name) \(version)")
      }
      guard isGroup else { break }
      guard let name = rest.first else {
        return .help(HelpFormatter.help(for: command, path: path))
      }
      let names = configuration.subcommands.map { $0.configuration.name }
      if ArgumentParser.looksLikeOption(name) {
        let options = ["--help"] + (configuration.version != nil ? ["--version"] : [])
        let optionName = String(name.unicodeScalars.prefix { $0 != "=" })
        throw UsageError(
          .unknownOption(optionName), suggestion: closestMatch(to: optionName, among: options),
          commandPath: path)
      }
      guard let next = configuration.subcommands.first(where: { $0.configuration.name == name })
      else {
        throw UsageError(
          .unknownCommand(name), suggestion: closestMatch(to: name, among: names),
          commandPath: path)
      }
      command = next
      path.append(name)
      rest = rest.dropFirst()
    }
    do {
      return .run(try command.parse(Array(rest)), path: path)
    } catch {
      var located = error
      located.commandPath = path
      throw located
    }
  }
}
