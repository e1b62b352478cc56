// Lets only bluetoothd call blekit's exported objects: who owns org.bluez right now, as the
// connection's object tree follows it.
import DBus

/// Admits method calls from the unique bus name that currently owns `org.bluez` and refuses
/// every other caller with `org.bluez.Error.NotAuthorized`.
///
/// The owner is the one a ``BlueZObjectTree`` follows through `NameOwnerChanged` (the check
/// keeps no subscription of its own), so a restarted bluetoothd (a new unique name) is
/// admitted and its predecessor is not. While nobody owns `org.bluez`, every call is refused.
public final class BluetoothdCallerCheck: Sendable {
  private enum Source: Sendable {
    case tree(BlueZObjectTree)
    case fixed(BusName?)
  }
  private let source: Source

  /// A check that admits whoever `tree` says owns `org.bluez`, from call to call.
  public init(following tree: BlueZObjectTree) {
    source = .tree(tree)
  }

  /// A check that admits exactly `owner` (for tests).
  public init(fixedOwner owner: BusName?) {
    source = .fixed(owner)
  }

  /// The unique name bluetoothd has right now, if it is on the bus.
  public var currentOwner: BusName? {
    switch source {
    case .tree(let tree): tree.owner
    case .fixed(let owner): owner
    }
  }

  /// True when `sender` is bluetoothd.
  public func admits(_ sender: BusName) -> Bool {
    currentOwner == sender
  }

  /// Throws `org.bluez.Error.NotAuthorized` unless `sender` is bluetoothd.
  public func check(_ sender: BusName) throws(DBusError) {
    guard admits(sender) else {
      throw DBusError.remote(
        name: BlueZError.errorPrefix + "NotAuthorized",
        message: "only bluetoothd (the owner of org.bluez) may call this object")
    }
  }
}
