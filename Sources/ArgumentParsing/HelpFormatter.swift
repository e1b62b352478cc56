// Generates a command's --help text from its configuration and argument specs.

/// Builds help text: OVERVIEW, USAGE, ARGUMENTS, OPTIONS, SUBCOMMANDS, then extra sections.
///
/// Rows are indented two spaces with the text in a fixed column; a label too long for the
/// column puts its text on the next line. Text wraps at ``width`` columns.
public enum HelpFormatter {
  /// The column where row text starts.
  public static let textColumn = 24
  /// The width text wraps at.
  public static let width = 80

  /// The help for `command`, reached by `path` (e.g. `["blekit", "scan"]`).
  public static func help(for command: any ParsableCommand.Type, path: [String]) -> String {
    let configuration = command.configuration
    let specs = command.argumentSpecs
    let isGroup = !configuration.subcommands.isEmpty
    var sections: [String] = []

    sections.append(wrap(words(configuration.abstract), after: "OVERVIEW: ", hanging: 10))
    if !configuration.discussion.isEmpty {
      sections.append(
        configuration.discussion.split(separator: "\n", omittingEmptySubsequences: false)
          .map { $0.hasPrefix(" ") ? String($0) : wrap(words(String($0)), after: "", hanging: 0) }
          .joined(separator: "\n"))
    }
    let command = "USAGE: " + path.joined(separator: " ")
    let usage = usageWords(configuration, specs: specs, isGroup: isGroup)
    sections.append(
      usage.isEmpty
        ? command : wrap(usage, after: command + " ", hanging: min(command.count + 1, 40)))

    let positionals = specs.filter { !$0.isNamed }
    if !positionals.isEmpty {
      sections.append(section("ARGUMENTS", positionals.map { ($0.valueName, text(for: $0)) }))
    }
    var optionRows = specs.filter(\.isNamed).map { (label(for: $0), text(for: $0)) }
    for option in BuiltInOption.options(for: configuration, isRoot: path.count == 1) {
      let label = option.names.joined(separator: ", ") + (option.valueName.map { " " + $0 } ?? "")
      let values = option.choices.map { " (values: " + $0.joined(separator: ", ") + ")" } ?? ""
      optionRows.append((label, option.help + values))
    }
    sections.append(section("OPTIONS", optionRows))
    if isGroup {
      let rows = configuration.subcommands.map {
        ($0.configuration.name, $0.configuration.abstract)
      }
      sections.append(section("SUBCOMMANDS", rows))
      sections.append(
        wrap(
          words("See '\(path.joined(separator: " ")) COMMAND --help' for a command's arguments."),
          after: "", hanging: 0))
    }
    for extra in configuration.extraSections {
      sections.append(section(extra.title, extra.rows))
    }
    return sections.joined(separator: "\n\n") + "\n"
  }

  /// The help for the command reached from `root` by the subcommand names in `names`.
  public static func help(
    forPath names: [String], root: any ParsableCommand.Type
  ) throws(UsageError) -> String {
    var command = root
    var path = [root.configuration.name]
    for name in names {
      let subcommands = command.configuration.subcommands
      guard let next = subcommands.first(where: { $0.configuration.name == name }) else {
        let suggestion = closestMatch(to: name, among: subcommands.map { $0.configuration.name })
        throw UsageError(.unknownCommand(name), suggestion: suggestion)
      }
      command = next
      path.append(name)
    }
    return help(for: command, path: path)
  }

  private static func usageWords(
    _ configuration: CommandConfiguration, specs: [ArgumentSpec], isGroup: Bool
  ) -> [String] {
    if isGroup {
      return (configuration.version != nil ? ["[--version]"] : []) + ["COMMAND"]
    }
    var words: [String] = []
    for spec in specs where spec.isNamed {
      let name = spec.longName ?? ""
      switch spec.kind {
      case .flag: words.append("[\(name)]")
      case .option(repeating: false): words.append("[\(name) \(spec.valueName)]")
      default: words.append("[\(name) \(spec.valueName) ...]")
      }
    }
    for spec in specs {
      guard case .positional(let arity) = spec.kind else { continue }
      switch arity {
      case .required: words.append(spec.valueName)
      case .optional: words.append("[\(spec.valueName)]")
      case .repeating: words.append("[\(spec.valueName) ...]")
      }
    }
    return words
  }

  private static func label(for spec: ArgumentSpec) -> String {
    var label = spec.shortName.map { "-\($0), " } ?? ""
    label += spec.longName ?? ""
    if spec.kind != .flag { label += " " + spec.valueName }
    return label
  }

  private static func text(for spec: ArgumentSpec) -> String {
    var notes: [String] = []
    if let choices = spec.choices { notes.append("values: " + choices.joined(separator: ", ")) }
    if let value = spec.defaultDescription { notes.append("default: " + value) }
    if spec.kind == .option(repeating: true) { notes.append("repeatable") }
    return notes.isEmpty ? spec.help : spec.help + " (" + notes.joined(separator: "; ") + ")"
  }

  /// A heading and its rows, labels at two spaces, text at ``textColumn``.
  static func section(_ title: String, _ rows: [(String, String)]) -> String {
    var lines = [title + ":"]
    for (label, text) in rows {
      let head = "  " + label
      let column = String(repeating: " ", count: textColumn)
      if head.count + 2 <= textColumn {
        let padded = head + String(repeating: " ", count: textColumn - head.count)
        lines.append(wrap(words(text), after: padded, hanging: textColumn))
      } else {
        lines.append(head)
        lines.append(wrap(words(text), after: column, hanging: textColumn))
      }
    }
    return lines.joined(separator: "\n")
  }

  /// Lays `words` out after `prefix`, breaking before ``width`` and indenting continuation
  /// lines by `hanging` columns. A word longer than a line stays whole.
  static func wrap(_ words: [String], after prefix: String, hanging: Int) -> String {
    var lines: [String] = []
    var line = prefix
    var lineHasWord = false
    for word in words {
      if lineHasWord && line.count + 1 + word.count > width {
        lines.append(line)
        line = String(repeating: " ", count: hanging) + word
      } else {
        line += (lineHasWord ? " " : "") + word
      }
      lineHasWord = true
    }
    lines.append(line)
    return lines.joined(separator: "\n")
  }

  /// Splits prose into words for ``wrap(_:after:hanging:)``.
  static func words(_ text: String) -> [String] {
    text.split(separator: " ").map(String.init)
  }
}
