// Walks from the root command through subcommand names to what the command line asks for.

/// What a command line asks for, once resolved.
public enum Invocation: Sendable {
  /// Print this help text on standard output and exit 0.
  case help(String)
  /// Print this version line on standard output and exit 0.
  case version(String)
  /// Print this generated text (a completion script, the manual page) on standard output and
  /// exit 0.
  case generated(String)
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
  /// The root option that prints a completion script: `--generate-completion-script bash`.
  public static let completionScriptOption = "--generate-completion-script"
  /// The root option that prints the manual page in roff.
  public static let manualOption = "--generate-manual"

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
      if path.count == 1, configuration.version != nil,
        let generated = try generatedText(for: rest, root: root)
      {
        return .generated(generated)
      }
      guard isGroup else { break }
      guard let name = rest.first else {
        return .help(HelpFormatter.help(for: command, path: path))
      }
      let names = configuration.subcommands.map { $0.configuration.name }
      if ArgumentParser.looksLikeOption(name) {
        let options = BuiltInOption.options(for: configuration, isRoot: path.count == 1)
          .flatMap(\.names)
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

  /// The completion script or manual page a root command line asks for, or `nil` when it
  /// asks for neither. The generator option must be the only thing on the line (with its
  /// shell, for the script).
  private static func generatedText(
    for words: ArraySlice<String>, root: any ParsableCommand.Type
  ) throws(UsageError) -> String? {
    guard let first = words.first else { return nil }
    let path = [root.configuration.name]
    if first == manualOption {
      if let extra = words.dropFirst().first {
        throw UsageError(.unexpectedArgument(extra), commandPath: path)
      }
      return ManualPage.page(for: root)
    }
    let shellWord: String
    var extra = words.dropFirst()
    if first == completionScriptOption {
      guard let word = extra.first, !ArgumentParser.looksLikeOption(word) else {
        throw UsageError(
          .missingValue(option: first, nextWordIsOptionLike: !extra.isEmpty), commandPath: path)
      }
      shellWord = word
      extra = extra.dropFirst()
    } else if first.hasPrefix(completionScriptOption + "=") {
      shellWord = String(first.dropFirst(completionScriptOption.count + 1))
    } else {
      return nil
    }
    let shell: CompletionShell
    do {
      shell = try CompletionShell(argument: shellWord)
    } catch {
      throw UsageError(
        .invalidValue(
          argument: "'\(completionScriptOption)'", value: shellWord, reason: error.reason),
        commandPath: path)
    }
    if let word = extra.first {
      throw UsageError(.unexpectedArgument(word), commandPath: path)
    }
    return shell.script(for: root)
  }
}
