// `blekit help [COMMAND ...]`: the help of blekit or of one of its commands.

import ArgumentParsing

/// Prints the same text as `blekit COMMAND --help`, or the root's help with no command.
struct HelpCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "help",
    abstract: "Show help for blekit or one of its commands.",
    discussion: "'blekit help scan' prints the same text as 'blekit scan --help'."
  )

  struct Arguments: ArgumentList {
    let command = RepeatedArgument<String>(
      "COMMAND", help: "The command to describe; several words for a nested command.")
  }

  /// The help text, found while validating so an unknown command is a usage error.
  let text: String

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    text = try HelpFormatter.help(forPath: arguments.command, root: Blekit.self)
  }

  func run() async throws {
    try StandardOutput.write(Array(text.utf8))
  }
}
