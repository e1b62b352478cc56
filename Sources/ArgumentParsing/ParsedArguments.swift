// The typed values of one command line, read by the names the command declared.

/// The values the parser found, keyed by ``ArgumentSpec/id``, each already converted.
public struct ParsedValues: Sendable {
  /// Converted values in command-line order, per spec id.
  var values: [String: [any Sendable]] = [:]

  /// Creates an empty set of values.
  public init() {}

  /// How many times the argument with this id was given.
  public func count(of id: String) -> Int { values[id]?.count ?? 0 }

  mutating func append(_ value: any Sendable, for id: String) {
    values[id, default: []].append(value)
  }

  func all<Value>(_ id: String, as _: Value.Type) -> [Value] {
    // The spec's converter produced these from `Value(argument:)`, so the cast always holds.
    (values[id] ?? []).map { $0 as! Value }
  }
}

/// A command's parsed arguments, read through the declarations' property names:
/// `arguments.json` is a `Bool`, `arguments.service` a `[String]`, `arguments.timeout` a
/// `Duration?` or a `Duration` when it has a default.
@dynamicMemberLookup
public struct ParsedArguments<Declarations: ArgumentList>: Sendable {
  private let declarations: Declarations
  private let parsed: ParsedValues

  /// Wraps values parsed with `Declarations.specs`.
  public init(_ parsed: ParsedValues) {
    self.declarations = Declarations()
    self.parsed = parsed
  }

  private func id(_ declaration: some ArgumentDeclaration) -> String { declaration.spec.id }

  /// Whether the argument appeared on the command line (for an option with a default, tells
  /// the default apart from the same value typed): `arguments.wasGiven(\.timeout)`.
  public func wasGiven<Declaration: ArgumentDeclaration>(
    _ keyPath: KeyPath<Declarations, Declaration>
  ) -> Bool {
    parsed.count(of: id(declarations[keyPath: keyPath])) > 0
  }

  /// A flag: whether it was given.
  public subscript(dynamicMember keyPath: KeyPath<Declarations, Flag>) -> Bool {
    parsed.count(of: id(declarations[keyPath: keyPath])) > 0
  }

  /// A single option: its value, or `nil` when absent.
  public subscript<Value>(dynamicMember keyPath: KeyPath<Declarations, Option<Value>>) -> Value? {
    parsed.all(id(declarations[keyPath: keyPath]), as: Value.self).last
  }

  /// An option with a default: its value, or the default when absent.
  public subscript<Value>(
    dynamicMember keyPath: KeyPath<Declarations, DefaultedOption<Value>>
  ) -> Value {
    let declaration = declarations[keyPath: keyPath]
    return parsed.all(id(declaration), as: Value.self).last ?? declaration.defaultValue
  }

  /// A repeatable option: every value, in command-line order.
  public subscript<Value>(
    dynamicMember keyPath: KeyPath<Declarations, RepeatedOption<Value>>
  ) -> [Value] {
    parsed.all(id(declarations[keyPath: keyPath]), as: Value.self)
  }

  /// A required positional: its value (the parser has already insisted on it).
  public subscript<Value>(dynamicMember keyPath: KeyPath<Declarations, Argument<Value>>) -> Value {
    parsed.all(id(declarations[keyPath: keyPath]), as: Value.self)[0]
  }

  /// An optional positional: its value, or `nil` when absent.
  public subscript<Value>(
    dynamicMember keyPath: KeyPath<Declarations, OptionalArgument<Value>>
  ) -> Value? {
    parsed.all(id(declarations[keyPath: keyPath]), as: Value.self).first
  }

  /// A trailing list of positionals: every word, in order.
  public subscript<Value>(
    dynamicMember keyPath: KeyPath<Declarations, RepeatedArgument<Value>>
  ) -> [Value] {
    parsed.all(id(declarations[keyPath: keyPath]), as: Value.self)
  }
}
