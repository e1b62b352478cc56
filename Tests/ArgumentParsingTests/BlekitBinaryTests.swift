// Runs the built `blekit` executable, when the build put one next to the tests.

import ArgumentParsing
import Foundation
import TestSupport
import Testing

private let blekitBinary = builtBlekit

/// Runs blekit with `arguments`; returns its status, standard output and standard error.
private func blekit(_ arguments: String...) throws -> (status: Int32, out: String, err: String) {
  let process = Process()
  let binary: URL = try #require(blekitBinary)
  process.executableURL = binary
  process.arguments = arguments
  let run = try runCapturing(process)
  return (run.status, run.output, run.error)
}

@Suite(.enabled(if: blekitBinary != nil, "the blekit executable was not built"))
struct BlekitBinaryTests {
  @Test func version() throws {
    let result = try blekit("--version")
    #expect(result.status == 0)
    #expect(result.out.hasPrefix("blekit "))
    #expect(result.out.hasSuffix("\n") && result.out.split(separator: "\n").count == 1)
    #expect(result.err == "")
  }

  @Test func help() throws {
    let result = try blekit("--help")
    #expect(result.status == 0)
    for heading in ["OVERVIEW: ", "USAGE: blekit ", "OPTIONS:", "SUBCOMMANDS:", "EXIT STATUS:"] {
      #expect(result.out.contains(heading))
    }
    #expect(try blekit().out == result.out)
    #expect(try blekit("help").out == result.out)
  }

  @Test func helpCommandMatchesHelpOption() throws {
    let byCommand = try blekit("help", "help")
    #expect(byCommand.status == 0)
    #expect(byCommand.out == (try blekit("help", "--help")).out)
    #expect(byCommand.out.contains("USAGE: blekit help [COMMAND ...]"))
  }

  @Test func usageErrorsExitTwo() throws {
    let unknown = try blekit("frobnicate")
    #expect(unknown.status == 2)
    #expect(unknown.out == "")
    #expect(unknown.err == "blekit: unknown command 'frobnicate'\nTry 'blekit --help'.\n")
    let option = try blekit("--verbose")
    #expect(option.status == 2)
    #expect(option.err == "blekit: unknown option '--verbose'\nTry 'blekit --help'.\n")
    let nested = try blekit("help", "frobnicate")
    #expect(nested.status == 2)
    #expect(nested.err == "blekit: unknown command 'frobnicate'\nTry 'blekit help --help'.\n")
  }
}
