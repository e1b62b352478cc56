// The root command: the program's name, version, overview and list of commands.

import ArgumentParsing

/// `blekit`: the root of the command tree. It only dispatches to its subcommands; naming no
/// command prints this help.
struct Blekit: ParsableCommand {
  /// The version `blekit --version` prints.
  static let version = "0.1.0"

  static let configuration = CommandConfiguration(
    name: "blekit",
    abstract: "Bluetooth Low Energy from the Linux command line, over BlueZ.",
    discussion: """
      blekit talks to bluetoothd over the system D-Bus: no root, no raw HCI sockets. \
      Errors go to standard error as one line; the exit status says what kind of failure \
      it was (see EXIT STATUS).
      """,
    version: version,
    subcommands: CommandRegistry.commands,
    extraSections: [ExitStatusMapping.helpSection],
    valueCompletions: ShellCompletionSources.byArgument,
    manualSections: ManualSections.all
  )

  init(parsing _: ParsedArguments<NoArguments>) {}

  /// Never called: a command group prints its help when no command is named.
  func run() async throws {}
}
