// blekit's own tree in the completion scripts and the manual page: every command and option
// appears, each script passes its shell's syntax check, groff has nothing to warn about, and
// the pipelines that complete adapter names and addresses read what blekit and busctl print.

import ArgumentParsing
import Foundation
import JSON
import TestSupport
import Testing

@testable import blekit

/// A fresh directory for one test's files.
private func scratchDirectory() throws -> URL {
  let directory = FileManager.default.temporaryDirectory
    .appendingPathComponent("blekit-shell-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  return directory
}

@Suite struct GeneratedShellSupportTests {
  let tree = CommandTree(root: Blekit.self)

  @Test func everyCommandIsInTheTree() {
    // Every registered command, then each group's subcommands right after it ("l2cap",
    // "l2cap listen", "l2cap connect").
    var expected: [String] = []
    for command in CommandRegistry.commands {
      let name = command.configuration.name
      expected.append(name)
      expected += command.configuration.subcommands.map { "\(name) \($0.configuration.name)" }
    }
    #expect(tree.nodes.dropFirst().map(\.key) == expected)
  }

  @Test(arguments: CompletionShell.allCases)
  func scriptNamesEveryCommandAndOption(shell: CompletionShell) throws {
    let script = shell.script(for: Blekit.self)
    // The script's words: names of commands and options, split at anything else.
    let words = Set(
      script.split { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.map(String.init))
    for node in tree.nodes {
      for name in node.subcommandNames {
        #expect(words.contains(name), "\(shell): \(name)")
      }
      for spec in node.specs where spec.isNamed {
        let long = try #require(spec.longName)
        let expected = shell == .fish ? "-l '\(long.dropFirst(2))'" : long
        #expect(script.contains(expected), "\(shell): \(node.key) \(long)")
        if let short = spec.shortName {
          #expect(script.contains(shell == .fish ? "-s '\(short)'" : "-\(short)"))
        }
        if let choices = spec.choices {
          for word in choices { #expect(script.contains(word), "\(shell): \(long) \(word)") }
        }
      }
    }
  }

  @Test(arguments: CompletionShell.allCases)
  func scriptPassesTheShellsSyntaxCheck(shell: CompletionShell) throws {
    try #require(
      installedProgram(shell.rawValue) != nil, "\(shell.rawValue) is not installed (scripts/setup)")
    let file = try scratchDirectory().appendingPathComponent("blekit.\(shell.rawValue)")
    try shell.script(for: Blekit.self).write(to: file, atomically: true, encoding: .utf8)
    let result = try runProgram("/usr/bin/env", [shell.rawValue, "-n", file.path])
    #expect(result.status == 0, "\(result.err)")
    #expect(result.err == "")
  }

  @Test func manualHasEveryCommandOptionAndStatusWithoutGroffWarnings() throws {
    let page = ManualPage.page(for: Blekit.self)
    let roff = { (text: String) in text.replacingOccurrences(of: "-", with: "\\-") }
    for node in tree.nodes.dropFirst() {
      #expect(page.contains(".SS \"blekit \(roff(node.key))\"\n"))
      for spec in node.specs {
        #expect(page.contains(roff(spec.longName ?? spec.valueName)), "\(node.key) \(spec.id)")
      }
    }
    for (status, _) in ExitStatus.documented {
      #expect(page.contains(".TP\n\\fB\(status.rawValue)\\fR\n"))
    }
    for title in ["ENVIRONMENT", "FILES", "EXAMPLES"] {
      #expect(page.contains(".SH \"\(title)\"\n"))
    }
    try #require(installedProgram("groff") != nil, "groff is not installed")
    let file = try scratchDirectory().appendingPathComponent("blekit.1")
    try page.write(to: file, atomically: true, encoding: .utf8)
    let result = try runProgram("/usr/bin/env", ["groff", "-man", "-Wall", "-z", file.path])
    #expect(result.status == 0)
    #expect(result.err == "")
  }

  /// Runs a completion pipeline with `fakes` (name: shell script) first on PATH.
  private func candidates(
    _ completion: ValueCompletion, fakes: [String: String]
  ) throws -> [String] {
    guard case .shellCommand(let command) = completion else {
      Issue.record("not a pipeline")
      return []
    }
    // The fakes are shell functions, not scripts in a scratch PATH: executing a file just
    // written can fail with ETXTBSY while a test running in parallel forks with the file's
    // write descriptor still open (a pipeline's first command runs in a subshell, so a fake's
    // `exit` ends only that command, as a real program's would).
    let functions = fakes.map { name, body in "\(name)() {\n\(body)\n}\n" }.joined()
    let result = try runProgram(
      "/usr/bin/env", ["sh", "-c", functions + command],
      environment: ["PATH": "/usr/bin:/bin"])
    #expect(result.status == 0)
    return result.out.split(separator: "\n").map(String.init)
  }

  @Test func adapterNamesComeFromTheAdaptersJSON() throws {
    let adapter = { (name: String, alias: String) -> JSONValue in
      .object([
        .init("name", .string(name)), .init("path", .string("/org/bluez/\(name)")),
        .init("alias", .string(alias)), .init("powered", .bool(true)), .init("roles", .array([])),
      ])
    }
    let json = JSONValue.array([adapter("hci0", "gateway"), adapter("hci1", "\"name\":\"x\"")]).text
    let names = try candidates(
      ShellCompletionSources.adapterNames,
      fakes: ["blekit": "printf '%s\\n' '\(json.replacingOccurrences(of: "'", with: "'\\''"))'"])
    #expect(names == ["hci0", "hci1"])
    // No bluetoothd: blekit fails, nothing is offered and nothing is shown.
    #expect(
      try candidates(
        ShellCompletionSources.adapterNames, fakes: ["blekit": "echo 'blekit: no' >&2; exit 4"])
        == [])
  }

  @Test func addressesComeFromBluetoothdsDevicePaths() throws {
    let paths = [
      "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci0/dev_00_AA_01_01_00_01",
      "/org/bluez/hci0/dev_00_AA_01_01_00_01/service000a",
      "/org/bluez/hci1/dev_C0_FF_EE_00_00_42",
    ]
    let addresses = try candidates(
      ShellCompletionSources.knownAddresses,
      fakes: ["busctl": "printf '%s\\n' \(paths.joined(separator: " "))"])
    #expect(addresses == ["00:AA:01:01:00:01", "C0:FF:EE:00:00:42"])
  }
}
