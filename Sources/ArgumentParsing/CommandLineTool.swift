// Runs a command tree for one command line: help, version, or the command, then the status.

/// Where the tool writes: standard output and standard error, replaceable in tests.
public struct CommandOutput: Sendable {
  /// Writes text (already ending in a newline) to standard output.
  public var standardOutput: @Sendable (String) -> Void
  /// Writes text (already ending in a newline) to standard error.
  public var standardError: @Sendable (String) -> Void

  /// Creates an output from two writers.
  public init(
    standardOutput: @escaping @Sendable (String) -> Void,
    standardError: @escaping @Sendable (String) -> Void
  ) {
    self.standardOutput = standardOutput
    self.standardError = standardError
  }
}

/// The top of a command-line program: resolve, run, report.
public enum CommandLineTool {
  /// Resolves `arguments` (without the program name) against `root` and carries it out.
  ///
  /// Help and version go to standard output with status 0. Any error, from parsing or from
  /// `run()`, is printed as `<root name>: <message>` (plus a hint for usage errors) on
  /// standard error, and its ``ErrorReport`` status is returned.
  ///
  /// Signals are the caller's business: it cancels the calling task, which makes a
  /// cooperative command end, and `signalStatus` says which signal came (``ExitStatus/
  /// interrupted`` or ``ExitStatus/terminated``), if any. A command that fails after a signal
  /// exits with the signal's status; one that returns normally (a monitor printing its
  /// summary on Ctrl-C) exits 0. A caller that cancels for another reason (its output failed)
  /// returns that reason's status from `signalStatus` and its one-line message from
  /// `stopMessage`, which then replaces "interrupted"/"terminated".
  public static func run(
    _ root: any ParsableCommand.Type, arguments: [String], output: CommandOutput,
    signalStatus: @escaping @Sendable () -> ExitStatus? = { nil },
    stopMessage: @escaping @Sendable () -> String? = { nil }
  ) async -> ExitStatus {
    var path = [root.configuration.name]
    do {
      switch try CommandResolver.resolve(arguments, root: root) {
      case .help(let text):
        output.standardOutput(text)
      case .version(let line):
        output.standardOutput(line + "\n")
      case .generated(let text):
        output.standardOutput(text)
      case .run(let command, let commandPath):
        path = commandPath
        try await command.run()
      }
      return .success
    } catch {
      var error = error
      // A usage error found while running (a late check) still gets its hint line.
      if var usage = error as? UsageError, usage.commandPath.isEmpty {
        usage.commandPath = path
        error = usage
      }
      var report = ErrorReport(error)
      if let signal = signalStatus() {
        report.status = signal
        if error is CancellationError {
          report.message =
            stopMessage() ?? (signal == .terminated ? "terminated" : "interrupted")
        }
      }
      output.standardError(report.lines(program: root.configuration.name))
      return report.status
    }
  }
}
