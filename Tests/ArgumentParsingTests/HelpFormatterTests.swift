// Generated help: sections, label column, wrapping, usage lines.

import ArgumentParsing
import Testing

@Suite struct HelpFormatterTests {
  @Test func leafCommandHelp() {
    let help = HelpFormatter.help(for: WriteFixture.self, path: ["tool", "write"])
    #expect(
      help == """
        OVERVIEW: Write a characteristic's value.

        USAGE: tool write [--text TEXT] [--without-response] ADDRESS CHAR-UUID [HEX]

        ARGUMENTS:
          ADDRESS               The device's address or name.
          CHAR-UUID             The characteristic.
          HEX                   The value in hexadecimal.

        OPTIONS:
          --text TEXT           Write TEXT as UTF-8 instead.
          --without-response    Write without response.
          -h, --help            Show help information.

        """)
  }

  @Test func optionNotesAndDiscussion() {
    let help = HelpFormatter.help(for: ScanFixture.self, path: ["tool", "scan"])
    let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
    #expect(lines[0] == "OVERVIEW: Scan for advertising devices.")
    #expect(lines[2] == "Shows each device once per second at most.")
    #expect(lines[4] == "USAGE: tool scan [--service UUID ...] [--min-rssi DBM] [--name TEXT]")
    #expect(
      lines[5] == "                 [--duplicates] [--json] [--timeout DURATION] [--power STATE]")
    #expect(!help.contains("ARGUMENTS:"))
    #expect(
      help.contains("\n  -s, --service UUID    Only devices advertising UUID. (repeatable)\n"))
    #expect(
      help.contains(
        "\n  -t, --timeout DURATION\n                        Stop after. (default: 10s)\n"))
    #expect(help.contains("\n  --power STATE         Power the adapter. (values: on, off)\n"))
    #expect(help.hasSuffix("  -h, --help            Show help information.\n"))
  }

  @Test func groupHelpListsSubcommandsAndExtraSections() {
    let help = HelpFormatter.help(for: RootFixture.self, path: ["tool"])
    #expect(
      help.hasPrefix("OVERVIEW: A test tool.\n\nUSAGE: tool [--version] COMMAND\n\nOPTIONS:\n"))
    #expect(
      help.contains(
        """
        OPTIONS:
          --version             Show the version.
          --generate-completion-script SHELL
                                Print a completion script for this shell. (values: bash,
                                zsh, fish)
          --generate-manual     Print the manual page (roff).
          -h, --help            Show help information.

        SUBCOMMANDS:
          scan                  Scan for advertising devices.
          write                 Write a characteristic's value.
          fail                  Fail on purpose.
          gatt                  GATT verbs.

        See 'tool COMMAND --help' for a command's arguments.

        EXIT STATUS:
          0                     Success.
          1                     Failure without a more specific status.
          2                     Bad command line: unknown command or option, missing or
                                malformed value.
        """))
    #expect(help.contains("\n  130                   Interrupted (SIGINT, Ctrl-C).\n"))
  }

  @Test func everyLineFitsTheWidth() {
    for command in [RootFixture.self, ScanFixture.self, WriteFixture.self]
      as [any ParsableCommand.Type]
    {
      let help = HelpFormatter.help(for: command, path: ["tool", "x"])
      for line in help.split(separator: "\n") {
        #expect(line.count <= HelpFormatter.width, "\(line)")
        #expect(!line.hasSuffix(" "), "trailing space: '\(line)'")
      }
    }
  }

  @Test func helpByPath() throws {
    #expect(
      try HelpFormatter.help(forPath: ["gatt", "write"], root: RootFixture.self)
        == HelpFormatter.help(for: WriteFixture.self, path: ["tool", "gatt", "write"]))
    #expect(throws: UsageError(.unknownCommand("scna"), suggestion: "scan")) {
      try HelpFormatter.help(forPath: ["scna"], root: RootFixture.self)
    }
  }
}

@Suite struct HelpDiscussionTests {
  struct Documented: ParsableCommand {
    static let configuration = CommandConfiguration(
      name: "doc", abstract: "Documented.",
      discussion: """
        First paragraph, long enough that it has to wrap past the eighty-column limit of help \
        text.

        Example:
          blekit doc --flag    (indented lines stay as written)
        """)
    init(parsing _: ParsedArguments<NoArguments>) {}
    func run() async throws {}
  }

  @Test func paragraphsWrapAndIndentedLinesStay() {
    let help = HelpFormatter.help(for: Documented.self, path: ["tool", "doc"])
    #expect(
      help.hasPrefix(
        """
        OVERVIEW: Documented.

        First paragraph, long enough that it has to wrap past the eighty-column limit of
        help text.

        Example:
          blekit doc --flag    (indented lines stay as written)

        USAGE: tool doc

        OPTIONS:
        """))
  }
}
