// Matches the words of a command line against one command's specs.

/// Parses the words after a command's name against its specs.
///
/// Rules:
/// - `--name value` and `--name=value`; `-n value`, `-nvalue` and clustered flags `-ab`.
/// - A word that starts with `-` is an option, except `-` alone and negative numbers
///   (`-50`, `-0.5`), which are values or positionals: `--min-rssi -50` works.
/// - An option's value is the next word unless that word looks like an option; write
///   `--text=-x` for a value that starts with a dash.
/// - `--` ends the options: every later word is positional.
/// - A non-repeatable option given twice is an error, as is a value that its type refuses.
public struct ArgumentParser: Sendable {
  /// The specs of the command being parsed.
  public let specs: [ArgumentSpec]
  private let byLongName: [String: ArgumentSpec]
  private let byShortName: [Character: ArgumentSpec]

  /// Creates a parser for these specs.
  public init(specs: [ArgumentSpec]) {
    self.specs = specs
    var long: [String: ArgumentSpec] = [:]
    var short: [Character: ArgumentSpec] = [:]
    for spec in specs {
      if let name = spec.longName { long[name] = spec }
      if let name = spec.shortName { short[name] = spec }
    }
    byLongName = long
    byShortName = short
  }

  /// Whether a word is read as an option (rather than a value or a positional).
  public static func looksLikeOption(_ word: String) -> Bool {
    guard word.hasPrefix("-"), word.count > 1 else { return false }
    return !isNegativeNumber(word)
  }

  /// `-50`, `-0.5`, `-.5`, `-0x10`: a dash and then a digit, or a dot and a digit.
  static func isNegativeNumber(_ word: String) -> Bool {
    let rest = word.dropFirst()
    guard let first = rest.first else { return false }
    if first.isASCII && first.isNumber { return true }
    return first == "." && (rest.dropFirst().first.map { $0.isASCII && $0.isNumber } ?? false)
  }

  /// Parses `words` into converted values, or throws the first mistake found.
  public func parse(_ words: [String]) throws(UsageError) -> ParsedValues {
    var values = ParsedValues()
    var positionals: [String] = []
    var index = 0
    var optionsEnded = false

    func takeValue(for name: String) throws(UsageError) -> String {
      guard index < words.count, !Self.looksLikeOption(words[index]) else {
        throw UsageError(
          .missingValue(option: name, nextWordIsOptionLike: index < words.count))
      }
      index += 1
      return words[index - 1]
    }

    while index < words.count {
      let word = words[index]
      index += 1
      if optionsEnded || !Self.looksLikeOption(word) {
        positionals.append(word)
      } else if word == "--" {
        optionsEnded = true
      } else if word.hasPrefix("--") {
        // Split at the first `=` scalar, not Character: a value starting with a combining
        // mark makes one Character of it and the `=`.
        let name: String
        let inline: String?
        let scalars = word.unicodeScalars
        if let equals = scalars.firstIndex(of: "=") {
          name = String(scalars[..<equals])
          inline = String(scalars[scalars.index(after: equals)...])
        } else {
          name = word
          inline = nil
        }
        guard let spec = byLongName[name] else {
          let suggestion = closestMatch(to: name, among: Array(byLongName.keys) + ["--help"])
          throw UsageError(.unknownOption(name), suggestion: suggestion)
        }
        if spec.kind == .flag {
          guard inline == nil else { throw UsageError(.unexpectedValue(flag: name)) }
          try record("", for: spec, in: &values)
        } else {
          if let inline {
            try record(inline, for: spec, in: &values)
          } else {
            try record(try takeValue(for: name), for: spec, in: &values)
          }
        }
      } else {
        // A cluster of short names: flags, then at most one option taking the rest as value
        // (by scalars, as above: the value may start with a combining mark).
        var letters = word.unicodeScalars.dropFirst()
        while let letter = letters.popFirst() {
          guard let spec = byShortName[Character(letter)] else {
            throw UsageError(.unknownOption("-\(letter)"))
          }
          if spec.kind == .flag {
            try record("", for: spec, in: &values)
          } else {
            if letters.isEmpty {
              try record(try takeValue(for: "-\(letter)"), for: spec, in: &values)
            } else {
              try record(String(letters), for: spec, in: &values)
            }
            break
          }
        }
      }
    }
    try assignPositionals(positionals, to: &values)
    return values
  }

  private func record(
    _ word: String, for spec: ArgumentSpec, in values: inout ParsedValues
  ) throws(UsageError) {
    if spec.kind == .option(repeating: false) && values.count(of: spec.id) > 0 {
      throw UsageError(.duplicateOption(spec.id))
    }
    do {
      values.append(try spec.convert(word), for: spec.id)
    } catch {
      throw UsageError(
        .invalidValue(argument: spec.displayName, value: word, reason: error.reason))
    }
  }

  private func assignPositionals(
    _ words: [String], to values: inout ParsedValues
  ) throws(UsageError) {
    var remaining = words[...]
    for spec in specs {
      guard case .positional(let arity) = spec.kind else { continue }
      switch arity {
      case .required:
        guard let word = remaining.popFirst() else {
          throw UsageError(.missingArgument(spec.valueName))
        }
        try record(word, for: spec, in: &values)
      case .optional:
        if let word = remaining.popFirst() { try record(word, for: spec, in: &values) }
      case .repeating:
        while let word = remaining.popFirst() { try record(word, for: spec, in: &values) }
      }
    }
    if let extra = remaining.first {
      throw UsageError(.unexpectedArgument(extra))
    }
  }
}
