// How a single command-line word becomes a typed value.

/// A type whose values can be written as one command-line word.
///
/// Conform a type to use it with ``Option``, ``RepeatedOption``, ``Argument`` and the other
/// declarations. The parser converts every value while it parses, so a malformed value is a
/// ``UsageError`` before any command code runs.
public protocol ExpressibleByArgument: Sendable {
  /// Creates a value from one command-line word, or throws the reason it is not one.
  ///
  /// The reason completes the sentence "invalid value 'x' for '--opt': ...", for example
  /// "expected an integer from -128 to 127".
  init(argument: String) throws(ArgumentValueError)

  /// The value as the user would type it, shown in help as the default ("10s", "-100").
  var argumentDescription: String { get }

  /// The complete list of accepted words, when there is one (shown in help), else `nil`.
  static var argumentChoices: [String]? { get }
}

extension ExpressibleByArgument {
  public var argumentDescription: String { String(describing: self) }
  public static var argumentChoices: [String]? { nil }
}

/// Why a word is not a valid value for an argument.
public struct ArgumentValueError: Error, Equatable, Sendable, CustomStringConvertible {
  /// Completes "invalid value 'x' for '--opt': ...", e.g. "expected an integer".
  public var reason: String

  /// Creates an error with the reason the word was refused.
  public init(_ reason: String) {
    self.reason = reason
  }

  public var description: String { reason }
}

extension ExpressibleByArgument
where
  Self: RawRepresentable, Self.RawValue == String,
  Self: CaseIterable
{
  /// Accepts exactly the raw values of the cases, e.g. `--power on|off`.
  public init(argument: String) throws(ArgumentValueError) {
    guard let value = Self(rawValue: argument) else {
      let words = Self.allCases.map(\.rawValue).joined(separator: ", ")
      throw ArgumentValueError("expected one of: \(words)")
    }
    self = value
  }

  public var argumentDescription: String { rawValue }

  public static var argumentChoices: [String]? { allCases.map(\.rawValue) }
}
