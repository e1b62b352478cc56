// A local GATT application: services as plain values, exported under one ObjectManager.
import DBus

/// The services one process publishes through `org.bluez.GattManager1.RegisterApplication`.
///
/// A value tree (application -> services -> characteristics -> descriptors) with handlers as
/// async closures. The library picks the object paths: `<root>/service<i>/char<j>/desc<k>`,
/// with the ObjectManager at `<root>`. Register it with
/// ``GattManager1/register(_:at:callerCheck:)``; the returned
/// ``GattApplicationRegistration`` unregisters it.
public struct GattApplication: Sendable {
  public var services: [LocalService]

  public init(services: [LocalService]) {
    self.services = services
  }

  /// The object path of service `service` under `root`.
  public static func path(root: ObjectPath, service: Int) -> ObjectPath {
    root.appending("service\(service)")
  }

  /// The object path of characteristic `characteristic` of service `service` under `root`.
  public static func path(root: ObjectPath, service: Int, characteristic: Int) -> ObjectPath {
    path(root: root, service: service).appending("char\(characteristic)")
  }

  /// The object path of a descriptor under `root`.
  public static func path(
    root: ObjectPath, service: Int, characteristic: Int, descriptor: Int
  ) -> ObjectPath {
    path(root: root, service: service, characteristic: characteristic)
      .appending("desc\(descriptor)")
  }
}

extension GattManager1 {
  /// Exports `application` under `root` (an ObjectManager there), then registers it.
  ///
  /// Every exported method answers only callers `callerCheck` admits (bluetoothd); others get
  /// `org.bluez.Error.NotAuthorized`. If registration fails, nothing stays exported.
  public func register(
    _ application: GattApplication, at root: ObjectPath, callerCheck: BluetoothdCallerCheck
  ) async throws(BlueZError) -> GattApplicationRegistration {
    var exporter = GattApplicationExporter(
      connection: connection, root: root, callerCheck: callerCheck)
    let objects = exporter.objects(for: application)
    var exported: [ObjectPath] = []
    func rollBack() {
      for path in exported.reversed() { connection.unexport(path) }
      connection.removeObjectManager(at: root)
    }
    do throws(DBusError) {
      // Nobody but bluetoothd reads the application either (properties, the object tree).
      let admit: @Sendable (BusName) throws(DBusError) -> Void = { sender throws(DBusError) in
        try callerCheck.check(sender)
      }
      for (path, var object) in objects {
        object.admit = admit
        try connection.export(object, at: path)
        exported.append(path)
      }
      try connection.addObjectManager(at: root, admit: admit)
    } catch {
      rollBack()
      throw BlueZError(error)
    }
    do {
      try await registerApplication(root)
    } catch {
      rollBack()
      throw error
    }
    return GattApplicationRegistration(
      manager: self, root: root, exported: exported, states: exporter.states,
      application: application)
  }
}
