// The bash, zsh and fish scripts: every command and option of the tree, valid syntax, and
// what Tab offers (bash and fish run here; zsh is checked for syntax and content).

import ArgumentParsing
import TestSupport
import Testing

@Suite struct CompletionScriptTests {
  let tree = CommandTree(root: RootFixture.self)

  /// Every subcommand name, long option and short option in the tree.
  var everyName: [String] {
    tree.nodes.flatMap { node in
      node.subcommandNames
        + node.specs.compactMap(\.longName)
        + node.specs.compactMap { $0.shortName.map { "-\($0)" } }
    }
  }

  @Test(arguments: CompletionShell.allCases)
  func scriptNamesEveryCommandAndOption(shell: CompletionShell) {
    let script = shell.script(for: RootFixture.self)
    for name in everyName + ["--version", "--help", "--generate-manual"] {
      #expect(script.contains(shell == .fish ? fishName(name) : name), "\(shell): \(name)")
    }
    // The closed sets and the root's value completions.
    for word in ["on", "off", "cancel", "bash", "zsh", "fish"] {
      #expect(script.contains(word), "\(shell): \(word)")
    }
    #expect(script.contains("echo 00:AA:01:01:00:01"))
  }

  /// How fish writes an option in `complete`: `-l name` or `-s x`; a command as itself.
  private func fishName(_ name: String) -> String {
    if name.hasPrefix("--") { return "-l '\(name.dropFirst(2))'" }
    if name.hasPrefix("-") { return "-s '\(name.dropFirst())'" }
    return name
  }

  @Test(arguments: CompletionShell.allCases)
  func scriptPassesTheShellsSyntaxCheck(shell: CompletionShell) throws {
    let program = try #require(
      installedProgram(shell.rawValue), "\(shell.rawValue) is not installed (scripts/setup)")
    let file = try temporaryFile("tool.\(shell.rawValue)", shell.script(for: RootFixture.self))
    let result = try runProgram(program, ["-n", file])
    #expect(result.status == 0, "\(result.err)")
    #expect(result.err == "")
  }

  /// What bash offers for a command line typed up to its end (the cursor), as bash calls the
  /// function: COMP_LINE and COMP_POINT (COMP_WORDS split as bash splits, at ':' and '=' too).
  private func bashOffers(_ line: String) throws -> [String] {
    let bash = try #require(installedProgram("bash"))
    let file = try temporaryFile("tool.bash", CompletionShell.bash.script(for: RootFixture.self))
    let result = try runProgram(
      bash,
      [
        "-c",
        """
        source '\(file)'
        COMP_LINE=$1; COMP_POINT=${#1}; _tool
        printf '%s\\n' "${COMPREPLY[@]}"
        """,
        "bash", line,
      ])
    #expect(result.status == 0, "\(result.err)")
    return result.out.split(separator: "\n").map(String.init)
  }

  private func bashOffers(_ words: [String]) throws -> [String] {
    try bashOffers(words.joined(separator: " "))
  }

  @Test func bashOffersCommandsOptionsAndValues() throws {
    #expect(try bashOffers(["tool", ""]) == ["scan", "write", "fail", "gatt"])
    #expect(try bashOffers(["tool", "s"]) == ["scan"])
    #expect(
      try bashOffers(["tool", "--"])
        == ["--version", "--generate-completion-script", "--generate-manual", "--help"])
    #expect(try bashOffers(["tool", "--generate-completion-script", "z"]) == ["zsh"])
    #expect(try bashOffers(["tool", "scan", "--power", ""]) == ["on", "off"])
    #expect(try bashOffers(["tool", "scan", "-t", "5", "--d"]) == ["--duplicates"])
    // A value after an option is not a positional; a negative number is a value.
    #expect(try bashOffers(["tool", "scan", "--min-rssi", "-50", "--po"]) == ["--power"])
    // Positionals by position: ADDRESS from the root's command, nothing for CHAR-UUID.
    #expect(try bashOffers(["tool", "write", ""]) == ["00:AA:01:01:00:01"])
    #expect(try bashOffers(["tool", "write", "--text", "x", ""]) == ["00:AA:01:01:00:01"])
    #expect(try bashOffers(["tool", "write", "00:AA:01:01:00:01", ""]) == [])
    #expect(try bashOffers(["tool", "fail", "c"]) == ["cli", "cancel"])
    // A nested group: its subcommands, then the leaf's arguments.
    #expect(try bashOffers(["tool", "gatt", ""]) == ["write"])
    #expect(try bashOffers(["tool", "gatt", "write", "--w"]) == ["--without-response"])
    #expect(try bashOffers(["tool", "gatt", "write", ""]) == ["00:AA:01:01:00:01"])
    // Bash replaces only the part of a word after its last ':' or '='.
    #expect(try bashOffers("tool write 00:AA:0") == ["01:01:00:01"])
    #expect(try bashOffers("tool write 00:AA:01:01:00:01 2a00 ") == [])
    #expect(try bashOffers("tool scan --power=o") == ["on", "off"])
    #expect(try bashOffers("tool scan --power=on --d") == ["--duplicates"])
    #expect(try bashOffers("tool --generate-completion-script=f") == ["fish"])
  }

  @Test func bashRegistersTheFunction() throws {
    let bash = try #require(installedProgram("bash"))
    let file = try temporaryFile("tool.bash", CompletionShell.bash.script(for: RootFixture.self))
    let result = try runProgram(bash, ["-c", "source '\(file)'; complete -p tool"])
    #expect(result.out == "complete -F _tool tool\n")
  }

  /// What fish offers for a command line (fish's own `complete -C`), candidates only.
  private func fishOffers(_ line: String) throws -> [String] {
    let fish = try #require(
      installedProgram("fish"), "fish is not installed (scripts/setup)")
    let file = try temporaryFile("tool.fish", CompletionShell.fish.script(for: RootFixture.self))
    let result = try runProgram(fish, ["-c", "source '\(file)'; complete -C '\(line)'"])
    #expect(result.status == 0, "\(result.err)")
    return result.out.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
  }

  @Test func fishOffersCommandsOptionsAndValues() throws {
    #expect(try fishOffers("tool ") == ["fail", "gatt", "scan", "write"])
    #expect(try fishOffers("tool scan --po") == ["--power"])
    #expect(try fishOffers("tool scan --power ") == ["off", "on"])
    #expect(try fishOffers("tool write ") == ["00:AA:01:01:00:01"])
    #expect(try fishOffers("tool gatt ") == ["write"])
    #expect(try fishOffers("tool gatt write --w") == ["--without-response"])
    #expect(try fishOffers("tool --generate-completion-script ") == ["bash", "fish", "zsh"])
  }

  @Test func zshScriptHasAFunctionPerCommand() {
    let script = CompletionShell.zsh.script(for: RootFixture.self)
    #expect(script.hasPrefix("#compdef tool\n"))
    for function in [
      "_tool()", "_tool_scan()", "_tool_write()", "_tool_gatt()", "_tool_gatt_write()",
    ] {
      #expect(script.contains("\n\(function) {\n"), "\(function)")
    }
    #expect(script.contains("'--power[Power the adapter.]:STATE:(on off)'"))
    #expect(script.contains("'*--service[Only devices advertising UUID.]:UUID: '"))
    #expect(script.contains("':ADDRESS:_tool_source_0'"))
    #expect(script.contains("'::HEX: '"))
  }

  /// Runs `body` in zsh after sourcing the script, with zsh's completion functions replaced by
  /// ones that print what they are given: `_arguments` its specs (and it moves a group to
  /// listing its commands), `_describe` the commands, `compadd -a` the candidates.
  private func zshCalls(_ body: String) throws -> [String] {
    let zsh = try #require(installedProgram("zsh"), "zsh is not installed (scripts/setup)")
    let file = try temporaryFile("_tool", CompletionShell.zsh.script(for: RootFixture.self))
    let result = try runProgram(
      zsh,
      [
        "-f", "-c",
        """
        _arguments() { state=command; print -rl -- "$@"; }
        _describe() { print -rl -- "${(@P)4}"; }
        compadd() { shift; print -rl -- "${(@P)1}"; }
        words=(tool)
        source '\(file)' >/dev/null
        \(body)
        """,
      ])
    #expect(result.status == 0, "\(result.err)")
    #expect(result.err == "")
    return result.out.split(separator: "\n").map(String.init)
  }

  @Test func zshFunctionsHandTheirSpecsToArguments() throws {
    #expect(
      try zshCalls("_tool_write")
        == [
          "-s", "--text[Write TEXT as UTF-8 instead.]:TEXT: ",
          "--without-response[Write without response.]", "-h[Show help information.]",
          "--help[Show help information.]", ":ADDRESS:_tool_source_0", ":CHAR-UUID: ",
          "::HEX: ",
        ])
    let root = try zshCalls("_tool")
    #expect(
      root.contains(
        "--generate-completion-script[Print a completion script for this shell.]:SHELL:(bash zsh fish)"
      ))
    #expect(
      root.suffix(4) == [
        "scan:Scan for advertising devices.", "write:Write a characteristic's value.",
        "fail:Fail on purpose.", "gatt:GATT verbs.",
      ])
    #expect(try zshCalls("_tool_source_0") == ["00:AA:01:01:00:01"])
  }

  @Test func generatorOptionsResolveAtTheRootOnly() throws {
    guard
      case .generated(let bash) = try CommandResolver.resolve(
        ["--generate-completion-script", "bash"], root: RootFixture.self)
    else {
      Issue.record("expected a generated script")
      return
    }
    #expect(bash == CompletionShell.bash.script(for: RootFixture.self))
    guard
      case .generated(let fish) = try CommandResolver.resolve(
        ["--generate-completion-script=fish"], root: RootFixture.self)
    else {
      Issue.record("expected a generated script")
      return
    }
    #expect(fish == CompletionShell.fish.script(for: RootFixture.self))
    let missing = usageError { () throws(UsageError) in
      try CommandResolver.resolve(["--generate-completion-script"], root: RootFixture.self)
    }
    #expect(missing?.message == "missing value for option '--generate-completion-script'")
    let unknown = usageError { () throws(UsageError) in
      try CommandResolver.resolve(["--generate-completion-script", "tcsh"], root: RootFixture.self)
    }
    #expect(
      unknown?.message
        == "invalid value 'tcsh' for '--generate-completion-script': expected one of: bash, zsh, fish"
    )
    let extra = usageError { () throws(UsageError) in
      try CommandResolver.resolve(["--generate-manual", "x"], root: RootFixture.self)
    }
    #expect(extra?.message == "unexpected argument 'x'")
    let inCommand = usageError { () throws(UsageError) in
      try CommandResolver.resolve(["scan", "--generate-manual"], root: RootFixture.self)
    }
    #expect(inCommand?.kind == .unknownOption("--generate-manual"))
  }
}
