// Errors that know their exit status, and how any error becomes "blekit: <message>".

/// An error that chooses the process's exit status and its one-line message.
///
/// Conform library errors in the command files that map them (e.g. a BlueZ `NotPermitted`
/// to ``ExitStatus/permissionDenied``), so the mapping lives next to the command that meets it.
public protocol ExitStatusError: Error {
  /// The status the process exits with.
  var exitStatus: ExitStatus { get }
  /// One line, without the program name: "adapter hci3 not found".
  var exitMessage: String { get }
}

/// A command failure: an exit status and a one-line message, printed as `blekit: <message>`.
public struct CLIError: ExitStatusError, Equatable, Sendable, CustomStringConvertible {
  public var exitStatus: ExitStatus
  public var exitMessage: String

  /// Creates a failure, e.g. `CLIError(.adapterNotFound, "adapter hci3 not found")`.
  public init(_ status: ExitStatus, _ message: String) {
    self.exitStatus = status
    self.exitMessage = message
  }

  public var description: String { exitMessage }
}

extension UsageError: ExitStatusError {
  public var exitStatus: ExitStatus { .usage }
  public var exitMessage: String { message }
}

/// What the program prints and returns for an error that ended a command.
public struct ErrorReport: Equatable, Sendable {
  /// The status to exit with.
  public var status: ExitStatus
  /// One line, without the program name.
  public var message: String
  /// A second line, for usage errors: `Try 'blekit scan --help'.`
  public var hint: String?

  /// Maps an error: ``ExitStatusError`` gives its own status; `CancellationError` is
  /// ``ExitStatus/interrupted``; anything else is ``ExitStatus/failure`` with its description.
  public init(_ error: any Error) {
    switch error {
    case let error as UsageError:
      self.init(status: .usage, message: error.message, hint: error.hint)
    case let error as any ExitStatusError:
      self.init(status: error.exitStatus, message: error.exitMessage, hint: nil)
    case is CancellationError:
      self.init(status: .interrupted, message: "interrupted", hint: nil)
    default:
      self.init(status: .failure, message: String(describing: error), hint: nil)
    }
  }

  /// Creates a report; newlines in the message are folded so it stays one line.
  public init(status: ExitStatus, message: String, hint: String?) {
    self.status = status
    self.message = message.split(whereSeparator: \.isNewline).joined(separator: " ")
    self.hint = hint
  }

  /// The lines for standard error, each ending in a newline: `<program>: <message>`, hint.
  public func lines(program: String) -> String {
    "\(program): \(message)\n" + (hint.map { $0 + "\n" } ?? "")
  }
}
