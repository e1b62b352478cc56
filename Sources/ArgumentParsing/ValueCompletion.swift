// What a shell offers for an argument's value when the user presses Tab.

/// The candidates a completion script offers for one argument's value.
///
/// Arguments whose value type has a closed set of words (``ArgumentSpec/choices``) complete
/// to those words without being listed anywhere; other arguments complete to nothing unless
/// the root command maps their ``ArgumentSpec/id`` to a completion in
/// ``CommandConfiguration/valueCompletions``.
public enum ValueCompletion: Sendable, Equatable {
  /// These fixed words.
  case words([String])
  /// File and directory names.
  case files
  /// The lines a shell pipeline prints, run each time Tab is pressed.
  ///
  /// The pipeline is pasted into bash, zsh and fish scripts alike, so it must be written in
  /// their common syntax: commands, arguments in single quotes (no `'` inside them), `|` and
  /// `2>/dev/null`; no `$`, no `$(...)`, no `&&`. It should finish quickly and print nothing
  /// on standard output when it fails.
  case shellCommand(String)
}

/// A shell that `--generate-completion-script` writes a script for.
public enum CompletionShell: String, CaseIterable, Sendable, ExpressibleByArgument {
  case bash
  case zsh
  case fish

  /// The completion script for the command tree under `root`.
  public func script(for root: any ParsableCommand.Type) -> String {
    let tree = CommandTree(root: root)
    switch self {
    case .bash: return BashCompletionScript.script(for: tree)
    case .zsh: return ZshCompletionScript.script(for: tree)
    case .fish: return FishCompletionScript.script(for: tree)
    }
  }
}
