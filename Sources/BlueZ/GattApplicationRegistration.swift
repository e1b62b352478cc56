// The handle of a registered GATT application: notifies values and unregisters everything.
import DBus
import Synchronization

/// A ``GattApplication`` published by bluetoothd. Keep it while the services should exist;
/// ``unregister()`` withdraws them and removes every exported object.
public final class GattApplicationRegistration: Sendable {
  /// The application root (the ObjectManager's path).
  public let root: ObjectPath
  /// The adapter the application is registered on.
  public var adapter: ObjectPath { manager.path }
  /// The application as registered.
  public let application: GattApplication

  private let manager: GattManager1
  private let exported: [ObjectPath]
  private let states: [ObjectPath: LocalAttributeState]
  private let isRegistered = Mutex(true)

  init(
    manager: GattManager1, root: ObjectPath, exported: [ObjectPath],
    states: [ObjectPath: LocalAttributeState], application: GattApplication
  ) {
    self.manager = manager
    self.root = root
    self.exported = exported
    self.states = states
    self.application = application
  }

  /// The object path of a characteristic, by its position in ``application``.
  public func path(service: Int, characteristic: Int) -> ObjectPath {
    GattApplication.path(root: root, service: service, characteristic: characteristic)
  }

  /// The attribute handle bluetoothd gave the object at `path`, once it said (0 before).
  public func handle(of path: ObjectPath) -> UInt16 {
    states[path]?.read { $0.handle } ?? 0
  }

  /// True while bluetoothd has notifications started on the characteristic at `path` through
  /// `StartNotify` (not through an acquired socket).
  public func isNotifying(_ path: ObjectPath) -> Bool {
    states[path]?.read { $0.notifying } ?? false
  }

  /// Sends `value` as a notification or indication through `PropertiesChanged(Value)` on the
  /// characteristic at `path` (bluetoothd notifies every subscribed central and truncates the
  /// value to MTU - 3 and to 512 bytes).
  public func notify(_ value: [UInt8], characteristic path: ObjectPath) throws(BlueZError) {
    do {
      try manager.connection.emitPropertiesChanged(
        path: path, interface: LocalCharacteristic.interface, changed: ["Value": .bytes(value)])
    } catch {
      throw BlueZError(error)
    }
  }

  /// Records that the socket acquired for the characteristic at `path` was closed.
  public func acquiredSocketClosed(characteristic path: ObjectPath, notify: Bool) {
    states[path]?.update {
      if notify { $0.notifyAcquired = false } else { $0.writeAcquired = false }
    }
  }

  /// Registers the still-exported application again, with the bluetoothd that owns `org.bluez`
  /// now (after a restart, the old one's registrations are gone). Does nothing once
  /// ``unregister()`` ran.
  public func registerAgain() async throws(BlueZError) {
    guard isRegistered.withLock({ $0 }) else { return }
    try await manager.registerApplication(root)
  }

  /// Unregisters the application, then removes its objects. Idempotent; errors from
  /// bluetoothd (already gone, application unknown) are returned but the objects are removed
  /// in any case.
  @discardableResult
  public func unregister() async -> BlueZError? {
    let first = isRegistered.withLock { wasRegistered in
      defer { wasRegistered = false }
      return wasRegistered
    }
    guard first else { return nil }
    var failure: BlueZError?
    do {
      try await manager.unregisterApplication(root)
    } catch {
      failure = error
    }
    for path in exported.reversed() { manager.connection.unexport(path) }
    manager.connection.removeObjectManager(at: root)
    return failure
  }
}
