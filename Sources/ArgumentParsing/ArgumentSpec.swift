// The description of one command-line element, shared by the parser and the help generator.

/// One argument a command accepts: a flag, an option that takes a value, or a positional.
///
/// Commands do not build specs by hand; they declare ``Flag``, ``Option`` and the other
/// declarations, whose specs drive both parsing and `--help`.
public struct ArgumentSpec: Sendable {
  /// What kind of command-line element this is.
  public enum Kind: Sendable, Equatable {
    /// A name alone: `--json`.
    case flag
    /// A name with a value: `--timeout 10s` or `--timeout=10s`; `repeating` if it may recur.
    case option(repeating: Bool)
    /// A word identified by its position.
    case positional(Arity)
  }

  /// How many words a positional argument takes.
  public enum Arity: Sendable, Equatable {
    /// Exactly one.
    case required
    /// Zero or one.
    case optional
    /// Zero or more; only the last positional may be repeating.
    case repeating
  }

  /// The element's kind.
  public let kind: Kind
  /// The long name with its dashes (`--min-rssi`); `nil` for a positional.
  public let longName: String?
  /// The one-character alias without its dash (`t` for `-t`), if any.
  public let shortName: Character?
  /// The placeholder for the value in help (`UUID`, `ADDRESS`); empty for a flag.
  public let valueName: String
  /// One or two sentences for `--help`.
  public let help: String
  /// The default value as the user would type it, shown in help.
  public let defaultDescription: String?
  /// Every accepted word, when the value type has a closed set (shown in help).
  public let choices: [String]?
  /// Turns one word into the typed value, or says why it cannot.
  let convert: @Sendable (String) throws(ArgumentValueError) -> any Sendable

  init(
    kind: Kind, longName: String?, shortName: Character?, valueName: String, help: String,
    defaultDescription: String? = nil, choices: [String]? = nil,
    convert: @escaping @Sendable (String) throws(ArgumentValueError) -> any Sendable
  ) {
    self.kind = kind
    self.longName = longName
    self.shortName = shortName
    self.valueName = valueName
    self.help = help
    self.defaultDescription = defaultDescription
    self.choices = choices
    self.convert = convert
  }

  /// The key the parsed values are stored under: the long name, or a positional's value name.
  public var id: String { longName ?? valueName }

  /// How messages refer to the element: `'--min-rssi'` or `ADDRESS`.
  public var displayName: String { longName.map { "'\($0)'" } ?? valueName }

  /// Whether the element is named (a flag or an option) rather than positional.
  public var isNamed: Bool {
    if case .positional = kind { return false }
    return true
  }
}
