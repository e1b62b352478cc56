// Subcommand dispatch, --help and --version, and the command path in errors.

import ArgumentParsing
import Testing

@Suite struct CommandResolverTests {
  private func resolve(_ words: [String]) throws(UsageError) -> Invocation {
    try CommandResolver.resolve(words, root: RootFixture.self)
  }

  private func helpText(_ words: [String]) throws -> String? {
    if case .help(let text) = try resolve(words) { return text }
    return nil
  }

  @Test func dispatchesToTheNamedCommand() throws {
    guard
      case .run(let command, _) = try resolve(["scan", "--service", "180d", "--min-rssi", "-60"])
    else {
      Issue.record("expected a command to run")
      return
    }
    let scan = try #require(command as? ScanFixture)
    #expect(scan.services == ["180d"])
    #expect(scan.minRSSI == -60)
  }

  @Test func nestedCommands() throws {
    guard case .run(let command, let path) = try resolve(["gatt", "write", "AA", "2a00", "ff"])
    else {
      Issue.record("expected a command to run")
      return
    }
    #expect(path == ["tool", "gatt", "write"])
    #expect((command as? WriteFixture)?.hex == "ff")
  }

  @Test func rootHelpAndNoCommand() throws {
    let rootHelp = HelpFormatter.help(for: RootFixture.self, path: ["tool"])
    #expect(try helpText([]) == rootHelp)
    #expect(try helpText(["--help"]) == rootHelp)
    #expect(try helpText(["-h", "scan"]) == rootHelp)
    #expect(
      try helpText(["gatt"]) == HelpFormatter.help(for: GroupFixture.self, path: ["tool", "gatt"]))
  }

  @Test func commandHelpWinsOverOtherMistakes() throws {
    let scanHelp = HelpFormatter.help(for: ScanFixture.self, path: ["tool", "scan"])
    #expect(try helpText(["scan", "--help"]) == scanHelp)
    #expect(try helpText(["scan", "--bogus", "-h"]) == scanHelp)
    #expect(try helpText(["scan", "--min-rssi", "x", "--help"]) == scanHelp)
  }

  @Test func helpAfterDoubleDashIsAnArgument() throws {
    guard case .run(let command, _) = try resolve(["write", "AA", "--", "2a00", "--help"]) else {
      Issue.record("expected a command to run")
      return
    }
    #expect((command as? WriteFixture)?.hex == "--help")
  }

  @Test func version() throws {
    guard case .version(let line) = try resolve(["--version"]) else {
      Issue.record("expected the version")
      return
    }
    #expect(line == "tool 9.8.7")
    // Only the root knows --version.
    #expect(throws: UsageError(.unknownOption("--version"), commandPath: ["tool", "scan"])) {
      try resolve(["scan", "--version"])
    }
  }

  @Test func unknownCommand() {
    let error = usageError { () throws(UsageError) in try resolve(["scna"]) }
    #expect(error == UsageError(.unknownCommand("scna"), suggestion: "scan", commandPath: ["tool"]))
    #expect(error?.message == "unknown command 'scna'; did you mean 'scan'?")
    #expect(error?.hint == "Try 'tool --help'.")
    let nested = usageError { () throws(UsageError) in try resolve(["gatt", "read"]) }
    #expect(nested?.message == "unknown command 'read'")
    #expect(nested?.hint == "Try 'tool gatt --help'.")
  }

  @Test func unknownOptionAtTheRoot() {
    let error = usageError { () throws(UsageError) in try resolve(["--verison"]) }
    #expect(error?.message == "unknown option '--verison'; did you mean '--version'?")
    #expect(error?.hint == "Try 'tool --help'.")
  }

  @Test func errorsInACommandCarryItsPath() {
    let error = usageError { () throws(UsageError) in try resolve(["gatt", "write", "AA"]) }
    #expect(error?.message == "missing argument CHAR-UUID")
    #expect(error?.hint == "Try 'tool gatt write --help'.")
    let invalid = usageError { () throws(UsageError) in try resolve(["scan", "--min-rssi", "-999"])
    }
    #expect(invalid?.hint == "Try 'tool scan --help'.")
  }
}
