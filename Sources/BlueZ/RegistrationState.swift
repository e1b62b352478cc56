// RegistrationState: the life of an object we export and register with bluetoothd (an agent,
// an advertisement): registered or released, exported or not, and the one unregistering.
import DBus
import Synchronization

/// Whether an exported object is registered with bluetoothd and still exported, and the
/// unregistering that undoes both exactly once. Shared by ``AgentRegistration`` and
/// ``LEAdvertisementRegistration``.
final class RegistrationState: Sendable {
  let path: ObjectPath
  private let connection: DBusConnection
  private let registered = Mutex(true)
  private let exported = Mutex(true)

  init(path: ObjectPath, connection: DBusConnection) {
    self.path = path
    self.connection = connection
  }

  /// False once unregistered or released by bluetoothd.
  var isRegistered: Bool { registered.withLock { $0 } }

  /// False once unregistered (the object is no longer on the bus).
  var isExported: Bool { exported.withLock { $0 } }

  /// bluetoothd released the object (or registering it failed).
  func released() {
    registered.withLock { $0 = false }
  }

  /// Registered again (after bluetoothd restarted).
  func registeredAgain() {
    registered.withLock { $0 = true }
  }

  /// Calls `unregisterCall` unless bluetoothd already released the object, then unexports it.
  /// Idempotent: later calls do nothing. Returns the unregistering's error, if any.
  func unregister(
    _ unregisterCall: () async throws(BlueZError) -> Void
  ) async -> BlueZError? {
    let wasRegistered = registered.withLock { value in
      defer { value = false }
      return value
    }
    let wasExported = exported.withLock { value in
      defer { value = false }
      return value
    }
    var failure: BlueZError?
    if wasRegistered {
      do {
        try await unregisterCall()
      } catch {
        failure = error
      }
    }
    if wasExported { connection.unexport(path) }
    return failure
  }
}
