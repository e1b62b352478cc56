// The program's entry point: run the command line, honour signals, exit with the status.

import ArgumentParsing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs `blekit` for the process's arguments and exits with the command's ``ExitStatus``.
///
/// (The entry point lives here rather than in `main.swift`, which cannot hold `@main`.)
@main
enum BlekitMain {
  static func main() async {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let signals = SignalForwarding()
    StandardOutput.ignoreBrokenPipe()
    // A signal comes first; else a failed write to standard output stops the command.
    let stopStatus: @Sendable () -> ExitStatus? = {
      signals.receivedStatus ?? (StandardOutput.failureMessage == nil ? nil : .outputFailed)
    }
    let command = Task {
      await CommandLineTool.run(
        Blekit.self, arguments: arguments, output: .standardStreams, signalStatus: stopStatus,
        stopMessage: { signals.receivedStatus == nil ? StandardOutput.failureMessage : nil })
    }
    StandardOutput.onFailure { command.cancel() }
    let sources = signals.start { command.cancel() }
    var status = await command.value
    withExtendedLifetime(sources) {}
    // A command that ended normally although a write failed (its output is incomplete).
    if status == .success, let failure = StandardOutput.failureMessage {
      CommandOutput.standardStreams.standardError("blekit: \(failure)\n")
      status = .outputFailed
    }
    // serve's commands still running (a read whose central left) end with blekit.
    ChildProcessGroups.killAll()
    exit(status.rawValue)
  }
}

extension CommandOutput {
  /// The process's standard output (buffered, like `print`) and standard error (written at
  /// once, after flushing standard output so the two keep their order on a terminal).
  static let standardStreams = CommandOutput(
    standardOutput: { text in
      StandardOutput.writeOrStop(Array(text.utf8))
    },
    standardError: { text in
      fflush(nil)
      var bytes = Array(text.utf8)[...]
      while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes {
          Syscall.write(STDERR_FILENO, $0.baseAddress, $0.count)
        }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        bytes = bytes.dropFirst(written)
      }
    })
}
