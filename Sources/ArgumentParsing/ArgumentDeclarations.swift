// The typed declarations a command lists once; each yields the spec for parsing and help.

/// Anything a command can declare in its ``ArgumentList``.
public protocol ArgumentDeclaration: Sendable {
  /// The spec used by the parser and the help generator.
  var spec: ArgumentSpec { get }
}

/// A boolean switch, `--json`. Reads as `true` when given.
public struct Flag: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares a flag such as `Flag("--json", help: "Print JSON Lines.")`.
  public init(_ longName: String, short: Character? = nil, help: String) {
    spec = ArgumentSpec(
      kind: .flag, longName: longName, shortName: short, valueName: "", help: help,
      convert: { _ in true })
  }
}

/// An option that may be given once; reads as `nil` when absent.
public struct Option<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares an option such as `Option<Int>("--min-rssi", value: "DBM", help: "...")`.
  public init(_ longName: String, short: Character? = nil, value: String, help: String) {
    spec = ArgumentSpec(
      kind: .option(repeating: false), longName: longName, shortName: short, valueName: value,
      help: help, choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}

/// An option that may be given once and has a default, shown in help; reads as a `Value`.
public struct DefaultedOption<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec
  /// The value read when the option is absent.
  public let defaultValue: Value

  /// Declares an option such as `DefaultedOption("--timeout", value: "DURATION",
  /// default: Duration.seconds(10), help: "...")`.
  public init(
    _ longName: String, short: Character? = nil, value: String, default defaultValue: Value,
    help: String
  ) {
    self.defaultValue = defaultValue
    spec = ArgumentSpec(
      kind: .option(repeating: false), longName: longName, shortName: short, valueName: value,
      help: help, defaultDescription: defaultValue.argumentDescription,
      choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}

/// An option that may be given any number of times; reads as the values in command-line order.
public struct RepeatedOption<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares an option such as `RepeatedOption<String>("--service", value: "UUID", help: "...")`.
  public init(_ longName: String, short: Character? = nil, value: String, help: String) {
    spec = ArgumentSpec(
      kind: .option(repeating: true), longName: longName, shortName: short, valueName: value,
      help: help, choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}

/// A positional argument that must be given; reads as a `Value`.
public struct Argument<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares a positional such as `Argument<String>("ADDRESS", help: "...")`.
  public init(_ name: String, help: String) {
    spec = ArgumentSpec(
      kind: .positional(.required), longName: nil, shortName: nil, valueName: name, help: help,
      choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}

/// A positional argument that may be left out; reads as `nil` when absent.
public struct OptionalArgument<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares an optional positional such as `OptionalArgument<String>("HEX", help: "...")`.
  public init(_ name: String, help: String) {
    spec = ArgumentSpec(
      kind: .positional(.optional), longName: nil, shortName: nil, valueName: name, help: help,
      choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}

/// The remaining positional words, zero or more; reads as an array.
public struct RepeatedArgument<Value: ExpressibleByArgument>: ArgumentDeclaration {
  public let spec: ArgumentSpec

  /// Declares a trailing list such as `RepeatedArgument<String>("COMMAND", help: "...")`.
  public init(_ name: String, help: String) {
    spec = ArgumentSpec(
      kind: .positional(.repeating), longName: nil, shortName: nil, valueName: name, help: help,
      choices: Value.argumentChoices,
      convert: { (word) throws(ArgumentValueError) in try Value(argument: word) })
  }
}
