// How a method call is named in errors ("org.bluez.Device1.Connect on /org/bluez/hci0/dev_…"),
// kept as its parts and written out only when an error needs it: a call that succeeds never
// builds the text.

struct CallLabel: Sendable, CustomStringConvertible {
  private enum Storage: Sendable {
    case text(String)
    case parts(interface: String?, member: String, path: String)
  }
  private let storage: Storage

  /// A caller's own wording.
  init(_ text: String) { storage = .text(text) }

  /// `interface.member on path`; a missing interface is written as `?`.
  init(interface: String?, member: String, path: String) {
    storage = .parts(interface: interface, member: member, path: path)
  }

  var description: String {
    switch storage {
    case .text(let text): return text
    case .parts(let interface, let member, let path):
      return "\(interface ?? "?").\(member) on \(path)"
    }
  }
}
