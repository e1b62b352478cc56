// A command line that cannot be run as written: exit status 2, a message and a hint.

/// A mistake in the command line, found before the command runs.
///
/// Printed as `blekit: <message>` and a hint line (`Try 'blekit scan --help'.`) on standard
/// error, with exit status ``ExitStatus/usage`` (2).
public struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
  /// What is wrong.
  public enum Kind: Equatable, Sendable {
    /// An option the command does not declare, e.g. `--foo` or `-x`.
    case unknownOption(String)
    /// A subcommand name the command group does not have.
    case unknownCommand(String)
    /// An option given without its value.
    case missingValue(option: String, nextWordIsOptionLike: Bool)
    /// A flag written with a value, `--json=yes`.
    case unexpectedValue(flag: String)
    /// A value its type refuses: the argument's display name, the word, and the reason.
    case invalidValue(argument: String, value: String, reason: String)
    /// A required positional left out.
    case missingArgument(String)
    /// A positional word the command has no place for.
    case unexpectedArgument(String)
    /// A non-repeatable option given more than once.
    case duplicateOption(String)
    /// A command-specific rule, e.g. "give either HEX or --text, not both".
    case invalid(String)
  }

  /// What is wrong.
  public var kind: Kind
  /// A close name for an unknown option or command ("did you mean ...?").
  public var suggestion: String?
  /// The command the mistake was found in, e.g. `["blekit", "scan"]`; set by the resolver.
  public var commandPath: [String]

  /// Creates an error; the resolver fills in the command path.
  public init(_ kind: Kind, suggestion: String? = nil, commandPath: [String] = []) {
    self.kind = kind
    self.suggestion = suggestion
    self.commandPath = commandPath
  }

  /// A command-specific rule broken, e.g. `UsageError.invalid("give HEX or --text")`.
  public static func invalid(_ message: String) -> UsageError {
    UsageError(.invalid(message))
  }

  /// The one-line message, without the program name.
  public var message: String {
    var text: String
    switch kind {
    case .unknownOption(let name):
      text = "unknown option '\(name)'"
    case .unknownCommand(let name):
      text = "unknown command '\(name)'"
    case .missingValue(let option, let nextWordIsOptionLike):
      text = "missing value for option '\(option)'"
      if nextWordIsOptionLike {
        text += " (for a value that starts with '-', write \(option)=VALUE)"
      }
    case .unexpectedValue(let flag):
      text = "option '\(flag)' does not take a value"
    case .invalidValue(let argument, let value, let reason):
      text = "invalid value '\(value)' for \(argument): \(reason)"
    case .missingArgument(let name):
      text = "missing argument \(name)"
    case .unexpectedArgument(let word):
      text = "unexpected argument '\(word)'"
    case .duplicateOption(let name):
      text = "option '\(name)' given more than once"
    case .invalid(let message):
      text = message
    }
    if let suggestion {
      text += "; did you mean '\(suggestion)'?"
    }
    return text
  }

  /// The line printed after the message: `Try 'blekit scan --help'.`
  public var hint: String? {
    commandPath.isEmpty ? nil : "Try '\(commandPath.joined(separator: " ")) --help'."
  }

  public var description: String { message }
}
