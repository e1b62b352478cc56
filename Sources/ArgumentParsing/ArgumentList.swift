// A command's arguments, declared once as the stored properties of one struct.

/// The arguments of one command, declared as stored properties with initial values:
///
/// ```swift
/// struct Arguments: ArgumentList {
///   let service = RepeatedOption<String>("--service", value: "UUID", help: "...")
///   let json = Flag("--json", help: "Print JSON Lines.")
/// }
/// ```
///
/// The properties are read by reflection, in declaration order, to build the specs for
/// parsing and help; a command reads the parsed values through ``ParsedArguments`` by the
/// same property names (`arguments.service`, `arguments.json`), so each argument is written
/// exactly once.
public protocol ArgumentList: Sendable {
  /// Creates the declarations; every stored property must have an initial value.
  init()
}

extension ArgumentList {
  /// The specs of every declared argument, in declaration order.
  public static var specs: [ArgumentSpec] {
    Mirror(reflecting: Self()).children.compactMap { ($0.value as? any ArgumentDeclaration)?.spec }
  }
}

/// The argument list of a command that takes no arguments of its own.
public struct NoArguments: ArgumentList {
  public init() {}
}

/// Names every command gets from the framework, which a command may not declare itself.
let reservedLongNames: Set<String> = ["--help", "--version"]
let reservedShortNames: Set<Character> = ["h"]

/// Mistakes in a list of specs: malformed or duplicate names, reserved names, positionals in
/// an order that cannot be parsed. Empty when the list is sound.
///
/// These are programming errors; the resolver stops the program when it meets one, and the
/// tests call this for each command.
public func problems(in specs: [ArgumentSpec]) -> [String] {
  var found: [String] = []
  var longNames: Set<String> = []
  var shortNames: Set<Character> = []
  var positionalNames: Set<String> = []
  var lastArity: ArgumentSpec.Arity?
  for spec in specs {
    if let long = spec.longName {
      let body = long.dropFirst(2)
      let wellFormed =
        long.hasPrefix("--") && body.count >= 2 && !body.hasPrefix("-")
        && body.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
      if !wellFormed { found.append("malformed option name '\(long)'") }
      if reservedLongNames.contains(long) { found.append("'\(long)' is reserved") }
      if !longNames.insert(long).inserted { found.append("'\(long)' is declared twice") }
    }
    if let short = spec.shortName {
      if !(short.isASCII && short.isLetter) {
        found.append("short name '-\(short)' is not a letter")
      }
      if reservedShortNames.contains(short) { found.append("'-\(short)' is reserved") }
      if !shortNames.insert(short).inserted { found.append("'-\(short)' is declared twice") }
    }
    if spec.isNamed && spec.longName == nil { found.append("an option without a long name") }
    guard case .positional(let arity) = spec.kind else { continue }
    if spec.valueName.isEmpty || spec.valueName.contains(" ") {
      found.append("malformed positional name '\(spec.valueName)'")
    }
    if !positionalNames.insert(spec.valueName).inserted {
      found.append("positional \(spec.valueName) is declared twice")
    }
    switch (lastArity, arity) {
    case (.repeating?, _):
      found.append("positional \(spec.valueName) follows a repeating positional")
    case (.optional?, .required):
      found.append("required positional \(spec.valueName) follows an optional one")
    default:
      break
    }
    lastArity = arity
  }
  return found
}
