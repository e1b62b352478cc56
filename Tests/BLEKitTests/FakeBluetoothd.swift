// A stand-in for bluetoothd on a private bus: owns org.bluez, exports one adapter with
// GattManager1 and LEAdvertisingManager1, and reads registered applications back the way
// bluetoothd does (GetManagedObjects, GetAll), so the peripheral side can be tested without a
// radio.
import BlueZ
import DBus
import Foundation
import Synchronization
import TestSupport

/// The fake daemon: one adapter, `/org/bluez/hci0`.
final class FakeBluetoothd: Sendable {
  static let adapter: ObjectPath = "/org/bluez/hci0"

  let connection: DBusConnection
  /// What is registered right now.
  final class Registry: Sendable {
    /// Application roots, with the sender that registered each.
    let applications = Mutex<[ObjectPath: BusName]>([:])
    /// Advertisement paths, with the properties read at registration.
    let advertisements = Mutex<[ObjectPath: [String: DBusValue]]>([:])
    /// How many times the adapter's `Powered` was read.
    let poweredReads = Mutex(0)
    /// When set, RegisterAdvertisement fails as bluetoothd does when the kernel refuses.
    let refusesAdvertisements = Mutex(false)
    /// When set, the adapter has legacy advertising only (no secondary channels).
    let legacyAdvertising = Mutex(false)
    /// The adapter's `Powered` (see ``FakeBluetoothd/setPowered(_:)``).
    let powered = Mutex(true)
  }
  let registry = Registry()

  /// Starts on `bus` with the adapter powered on or off.
  init(bus: PrivateBus, powered: Bool = true) async throws {
    connection = try bus.connect()
    registry.powered.withLock { $0 = powered }
    _ = try await connection.requestName("org.bluez")
    let connection = self.connection
    let registry = self.registry
    let gattManager = ExportedInterface(
      name: "org.bluez.GattManager1",
      methods: [
        ExportedMethod(name: "RegisterApplication", inSignature: "oa{sv}", outSignature: "") {
          call in
          guard let root = call.arguments.first?.objectPathValue else { return [] }
          // bluetoothd reads the whole tree before it answers.
          _ = try await connection.call(
            destination: call.sender, path: root,
            interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
          registry.applications.withLock { $0[root] = call.sender }
          return []
        },
        ExportedMethod(name: "UnregisterApplication", inSignature: "o", outSignature: "") {
          call in
          guard let root = call.arguments.first?.objectPathValue,
            registry.applications.withLock({ $0.removeValue(forKey: root) }) != nil
          else {
            throw DBusError.remote(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist")
          }
          return []
        },
      ])
    let advertisingManager = ExportedInterface(
      name: "org.bluez.LEAdvertisingManager1",
      methods: [
        ExportedMethod(name: "RegisterAdvertisement", inSignature: "oa{sv}", outSignature: "") {
          call in
          guard let path = call.arguments.first?.objectPathValue else { return [] }
          if registry.refusesAdvertisements.withLock({ $0 }) {
            throw DBusError.remote(
              name: "org.bluez.Error.Failed", message: "Failed to register advertisement")
          }
          let reply = try await connection.call(
            destination: call.sender, path: path, interface: "org.freedesktop.DBus.Properties",
            member: "GetAll", arguments: [.string("org.bluez.LEAdvertisement1")])
          registry.advertisements.withLock {
            $0[path] = reply.first?.stringVariantDictionary ?? [:]
          }
          return []
        },
        ExportedMethod(name: "UnregisterAdvertisement", inSignature: "o", outSignature: "") {
          call in
          guard let path = call.arguments.first?.objectPathValue,
            registry.advertisements.withLock({ $0.removeValue(forKey: path) }) != nil
          else {
            throw DBusError.remote(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist")
          }
          return []
        },
      ],
      properties: [
        ExportedProperty(name: "ActiveInstances", signature: "y", access: .read) {
          .byte(UInt8(registry.advertisements.withLock { $0.count }))
        },
        ExportedProperty(name: "SupportedInstances", signature: "y", access: .read) { .byte(5) },
        ExportedProperty(name: "SupportedSecondaryChannels", signature: "as", access: .read) {
          .array(
            element: "s",
            registry.legacyAdvertising.withLock { $0 } ? [] : [.string("1M"), .string("2M")])
        },
        ExportedProperty(name: "SupportedIncludes", signature: "as", access: .read) {
          .array(element: "s", [.string("tx-power"), .string("appearance")])
        },
      ])
    let adapter = ExportedInterface(
      name: "org.bluez.Adapter1",
      properties: [
        ExportedProperty(name: "Powered", signature: "b", access: .read) {
          registry.poweredReads.withLock { $0 += 1 }
          return .bool(registry.powered.withLock { $0 })
        },
        ExportedProperty(name: "Address", signature: "s", access: .read) {
          .string("00:AA:01:01:00:01")
        },
      ])
    try connection.addObjectManager(at: "/")
    try connection.export(
      ExportedObject(interfaces: [adapter, gattManager, advertisingManager]), at: Self.adapter)
  }

  /// The characteristic paths of a registered application, by UUID (lowercased).
  func characteristics(of root: ObjectPath, owner: BusName) async throws -> [String: ObjectPath] {
    let reply = try await connection.call(
      destination: owner, path: root, interface: "org.freedesktop.DBus.ObjectManager",
      member: "GetManagedObjects")
    var result: [String: ObjectPath] = [:]
    for entry in reply.first?.dictionaryValue ?? [] {
      guard let path = entry.key.objectPathValue else { continue }
      for interface in entry.value.dictionaryValue ?? []
      where interface.key.stringValue == "org.bluez.GattCharacteristic1" {
        if let uuid = interface.value.stringVariantDictionary?["UUID"]?.stringValue {
          result[uuid.lowercased()] = path
        }
      }
    }
    return result
  }

  /// Calls a GattCharacteristic1 method on an application object, as bluetoothd would.
  func callCharacteristic(
    _ member: MemberName, on path: ObjectPath, owner: BusName, arguments: [DBusValue] = [],
    from caller: DBusConnection? = nil
  ) async throws -> [DBusValue] {
    try await (caller ?? connection).call(
      destination: owner, path: path, interface: "org.bluez.GattCharacteristic1",
      member: member, arguments: arguments)
  }

  /// Switches the adapter on or off, and says so as bluetoothd does (PropertiesChanged).
  func setPowered(_ on: Bool) throws {
    registry.powered.withLock { $0 = on }
    try connection.emitPropertiesChanged(
      path: Self.adapter, interface: "org.bluez.Adapter1", changed: ["Powered": .bool(on)])
  }

  func close() { connection.close() }
}
