// The roff manual page: every command and option, the exit statuses, the root's sections, and
// no warning from groff.

import ArgumentParsing
import TestSupport
import Testing

@Suite struct ManualPageTests {
  let page = ManualPage.page(for: RootFixture.self)

  /// A name as the page writes it: every dash escaped.
  private func roff(_ text: String) -> String {
    text.split(separator: "-", omittingEmptySubsequences: false).joined(separator: "\\-")
  }

  @Test func pageHasASectionPerCommandWithEveryArgument() {
    #expect(page.contains(".TH \"TOOL\" 1 \"\" \"tool 9.8.7\" \"User Commands\"\n"))
    #expect(page.contains(".SH NAME\ntool \\- A test tool.\n"))
    for node in CommandTree(root: RootFixture.self).nodes.dropFirst() {
      #expect(page.contains(".SS \"\(node.path.joined(separator: " "))\"\n"), "\(node.path)")
      #expect(page.contains(roff(node.configuration.abstract)))
      for spec in node.specs {
        #expect(page.contains(roff(spec.longName ?? spec.valueName)), "\(spec.id)")
        #expect(page.contains(roff(spec.help)), "\(spec.id)")
      }
    }
    #expect(
      page.contains(
        "\\fB\\-t\\fR, \\fB\\-\\-timeout\\fR \\fIDURATION\\fR\nStop after. (default: 10s)\n"))
  }

  @Test func pageHasTheExitStatusesAndTheRootsSections() {
    for (status, meaning) in ExitStatus.documented {
      #expect(page.contains(".TP\n\\fB\(status.rawValue)\\fR\n\(roff(meaning))\n"))
    }
    let titles = [
      ".SH OPTIONS", ".SH COMMANDS", ".SH \"EXIT STATUS\"", ".SH \"ENVIRONMENT\"",
      ".SH \"EXAMPLES\"",
    ]
    let positions = titles.map { page.ranges(of: $0).first?.lowerBound }
    #expect(positions.allSatisfy { $0 != nil })
    #expect(positions.compactMap { $0 } == positions.compactMap { $0 }.sorted())
    #expect(page.contains(".TP\n\\fBTOOL_HOME\\fR\nWhere the tool keeps its state.\n"))
    // An example keeps its lines; a leading dot and a backslash are escaped.
    #expect(
      page.contains(
        ".nf\n.ft CR\n$ tool write 00:AA:01:01:00:01 2a00 ff\n\\&.hidden line\n\\ebackslash\n.ft R\n.fi\n"
      ))
  }

  @Test func groffFindsNothingToWarnAbout() throws {
    let groff = try #require(installedProgram("groff"), "groff is not installed")
    let file = try temporaryFile("tool.1", page)
    let result = try runProgram(groff, ["-man", "-Wall", "-z", file])
    #expect(result.status == 0)
    #expect(result.err == "")
  }

  @Test func manRendersThePage() throws {
    let man = try #require(installedProgram("man"), "man is not installed")
    let file = try temporaryFile("tool.1", page)
    let result = try runProgram(
      man, ["-l", file],
      environment: ["MANWIDTH": "80", "MANPAGER": "cat", "PATH": "/usr/bin:/bin"])
    #expect(result.status == 0, "\(result.err)")
    #expect(result.out.contains("tool - A test tool."))
    #expect(result.out.contains("tool gatt write"))
    #expect(result.out.contains("--without-response"))
  }
}
