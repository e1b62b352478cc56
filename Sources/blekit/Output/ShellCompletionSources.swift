// What the completion scripts offer for values the declarations cannot enumerate themselves.

import ArgumentParsing

/// Completion candidates by argument id, for ``Blekit``'s configuration. Values with a closed
/// set of words (`--confirm auto|prompt`, `--power on|off`) need no entry: the scripts take
/// those from the declarations.
enum ShellCompletionSources {
  /// Adapter names, from `blekit adapters --json` (nothing if bluetoothd does not answer).
  static let adapterNames = ValueCompletion.shellCommand(
    "blekit adapters --json 2>/dev/null | grep -o '\"name\":\"[^\"]*\"' | cut -d '\"' -f 4"
  )

  /// Addresses of the devices bluetoothd knows (paired, cached or recently seen), from its
  /// object paths: `/org/bluez/hci0/dev_00_AA_01_01_00_01`.
  static let knownAddresses = ValueCompletion.shellCommand(
    "busctl --system --list tree org.bluez 2>/dev/null | grep -o 'dev_[0-9A-F_]*' | cut -c 5- | tr _ : | sort -u"
  )

  /// The completions by ``ArgumentSpec/id``: an option's long name or a positional's name.
  static let byArgument: [String: ValueCompletion] = [
    "--adapter": adapterNames,
    "ADDRESS": knownAddresses,
    "ADDRESS|NAME": knownAddresses,
    "--from": knownAddresses,
    "--allow": knownAddresses,
    "--file": .files,
    "--output": .files,
    "COMMAND": .words(CommandRegistry.commands.map { $0.configuration.name }),
  ]
}
