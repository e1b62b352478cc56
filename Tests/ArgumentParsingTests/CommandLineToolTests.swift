// The whole path of one command line: what reaches stdout and stderr, and the status.

import ArgumentParsing
import Synchronization
import Testing

/// Collects what the tool writes, per stream.
final class CapturedOutput: Sendable {
  private let streams = Mutex<(out: String, err: String)>(("", ""))

  var out: String { streams.withLock { $0.out } }
  var err: String { streams.withLock { $0.err } }

  var output: CommandOutput {
    CommandOutput(
      standardOutput: { text in self.streams.withLock { $0.out += text } },
      standardError: { text in self.streams.withLock { $0.err += text } })
  }
}

@Suite struct CommandLineToolTests {
  private func run(_ words: [String]) async -> (ExitStatus, out: String, err: String) {
    let captured = CapturedOutput()
    let status = await CommandLineTool.run(
      RootFixture.self, arguments: words, output: captured.output)
    return (status, captured.out, captured.err)
  }

  @Test func helpGoesToStandardOutput() async {
    let (status, out, err) = await run(["scan", "--help"])
    #expect(status == .success)
    #expect(out == HelpFormatter.help(for: ScanFixture.self, path: ["tool", "scan"]))
    #expect(err == "")
  }

  @Test func versionGoesToStandardOutput() async {
    let (status, out, err) = await run(["--version"])
    #expect(status == .success)
    #expect(out == "tool 9.8.7\n")
    #expect(err == "")
  }

  @Test func usageErrorsExitTwoWithTwoLines() async {
    let (status, out, err) = await run(["scan", "--min-rssi", "abc"])
    #expect(status == .usage)
    #expect(out == "")
    #expect(
      err == """
        tool: invalid value 'abc' for '--min-rssi': expected an integer
        Try 'tool scan --help'.

        """)
  }

  @Test func unknownCommandExitsTwo() async {
    let (status, _, err) = await run(["bogus"])
    #expect(status == .usage)
    #expect(err == "tool: unknown command 'bogus'\nTry 'tool --help'.\n")
  }

  @Test func runFailuresReportTheirStatus() async {
    let cli = await run(["fail", "cli"])
    #expect(cli.0 == .adapterNotFound)
    #expect(cli.err == "tool: adapter hci7 not found\n")
    let cancelled = await run(["fail", "cancel"])
    #expect(cancelled.0 == .interrupted)
    #expect(cancelled.err == "tool: interrupted\n")
    let other = await run(["fail", "other"])
    #expect(other.0 == .failure)
    #expect(other.err == "tool: Opaque()\n")
    let usage = await run(["fail", "usage"])
    #expect(usage.0 == .usage)
    #expect(usage.err == "tool: bad combination\nTry 'tool fail --help'.\n")
  }

  @Test func failuresAfterASignalTakeTheSignalsStatus() async {
    for (signal, message) in [(ExitStatus.interrupted, "interrupted"), (.terminated, "terminated")]
    {
      let captured = CapturedOutput()
      let cancelled = await CommandLineTool.run(
        RootFixture.self, arguments: ["fail", "cancel"], output: captured.output,
        signalStatus: { signal })
      #expect(cancelled == signal)
      #expect(captured.err == "tool: \(message)\n")
    }
    // Another error keeps its message but takes the signal's status.
    let captured = CapturedOutput()
    let failed = await CommandLineTool.run(
      RootFixture.self, arguments: ["fail", "cli"], output: captured.output,
      signalStatus: { .terminated })
    #expect(failed == .terminated)
    #expect(captured.err == "tool: adapter hci7 not found\n")
    // A command that ends normally after a signal succeeds.
    let finished = await CommandLineTool.run(
      RootFixture.self, arguments: ["fail", "none"], output: CapturedOutput().output,
      signalStatus: { .interrupted })
    #expect(finished == .success)
  }

  @Test func successfulRun() async {
    let (status, _, err) = await run(["fail", "none"])
    #expect(status == .success)
    #expect(err == "")
  }
}
