// Lets only bluetoothd call blekit's exported objects: tracks who owns org.bluez right now.
import DBus
import Synchronization

/// Admits method calls from the unique bus name that currently owns `org.bluez` and refuses
/// every other caller with `org.bluez.Error.NotAuthorized`.
///
/// The owner is looked up once and then followed through `NameOwnerChanged`, so a restarted
/// bluetoothd (a new unique name) is admitted and its predecessor is not. While nobody owns
/// `org.bluez`, every call is refused.
public final class BluetoothdCallerCheck: Sendable {
  private let owner = Mutex<BusName?>(nil)
  private let watcher = Mutex<Task<Void, Never>?>(nil)

  /// Starts following the owner of `org.bluez` on `connection`.
  public static func start(on connection: DBusConnection) async throws(BlueZError)
    -> BluetoothdCallerCheck
  {
    let check = BluetoothdCallerCheck()
    do {
      // Subscribe before asking, so a change between the two is not missed.
      let changes = try await connection.nameOwnerChanges(BlueZ.service)
      let current = try await connection.nameOwner(BlueZ.service)
      check.owner.withLock { $0 = current }
      let task = Task { [weak check] in
        do throws(DBusError) {
          for try await newOwner in changes {
            guard let check else { return }
            check.owner.withLock { $0 = newOwner }
          }
        } catch {
          // The bus connection was lost: nobody can call any more.
          check?.owner.withLock { $0 = nil }
        }
      }
      check.watcher.withLock { $0 = task }
    } catch {
      throw BlueZError(error)
    }
    return check
  }

  /// A check that admits exactly `owner` (for tests).
  public init(fixedOwner owner: BusName?) {
    self.owner.withLock { $0 = owner }
  }

  private init() {}

  deinit {
    watcher.withLock { $0?.cancel() }
  }

  /// The unique name bluetoothd has right now, if it is on the bus.
  public var currentOwner: BusName? { owner.withLock { $0 } }

  /// True when `sender` is bluetoothd.
  public func admits(_ sender: BusName) -> Bool {
    owner.withLock { $0 == sender }
  }

  /// Throws `org.bluez.Error.NotAuthorized` unless `sender` is bluetoothd.
  public func check(_ sender: BusName) throws(DBusError) {
    guard admits(sender) else {
      throw DBusError.remote(
        name: BlueZError.errorPrefix + "NotAuthorized",
        message: "only bluetoothd (the owner of org.bluez) may call this object")
    }
  }

  /// Stops following the owner.
  public func stop() {
    watcher.withLock {
      $0?.cancel()
      $0 = nil
    }
  }
}
