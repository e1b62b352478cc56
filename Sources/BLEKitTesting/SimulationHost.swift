// The simulated bluetoothd: owns org.bluez on the private bus, exports the adapter hci0 with
// discovery (Adapter1), GattManager1 and LEAdvertisingManager1, and the peripherals' objects.
import BLEKit
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// The daemon's side of a simulation (internal: its API names D-Bus types).
final class SimulationHost: Sendable {
  static let adapterPath: ObjectPath = "/org/bluez/hci0"
  static let adapterAddress = "00:AA:00:00:00:01"

  let connection: DBusConnection
  let state: Observed<State>

  struct State: Sendable {
    var discovering = false
    /// The service UUIDs of the last SetDiscoveryFilter (empty: everything is heard).
    var filter: Set<BluetoothUUID> = []
    var peripherals: [SimulatedPeripheral] = []
    /// Registered GATT applications (root path, owner).
    var applications: [ObjectPath: BusName] = [:]
    /// Registered advertisements, with the properties read at registration.
    var advertisements: [ObjectPath: [String: DBusValue]] = [:]
    var discoveryStarts = 0
    /// Discovery runs and every peripheral in range has been heard (what tests wait for).
    var heardAll = false
  }

  var isDiscovering: Bool { state.read(\.discovering) }

  init(address: String) async throws {
    connection = try DBusConnection(address: address)
    state = Observed(State())
    try connection.addObjectManager(at: "/")
    try connection.export(ExportedObject(interfaces: adapterInterfaces()), at: Self.adapterPath)
    _ = try await connection.requestName(BlueZ.service)
  }

  /// A peripheral joins the air; heard at once if a scan runs.
  func add(_ peripheral: SimulatedPeripheral) {
    peripheral.attach(to: self)
    state.update { $0.peripherals.append(peripheral) }
    hear(peripheral)
  }

  /// Exports the device object of `peripheral` if a scan runs and its filter matches.
  func hear(_ peripheral: SimulatedPeripheral) {
    let (discovering, filter) = state.read { ($0.discovering, $0.filter) }
    if discovering { peripheral.heard(filter: filter) }
  }

  private func setDiscovering(_ on: Bool) {
    let changed = state.update { state -> Bool in
      defer { state.discovering = on }
      if on { state.discoveryStarts += 1 } else { state.heardAll = false }
      return state.discovering != on
    }
    if changed {
      try? connection.emitPropertiesChanged(
        path: Self.adapterPath, interface: Adapter1.interface, changed: ["Discovering": .bool(on)])
    }
    if on {
      for peripheral in state.read(\.peripherals) { hear(peripheral) }
      state.update { $0.heardAll = $0.discovering }
    }
  }

  private func adapterInterfaces() -> [ExportedInterface] {
    let constant = { (name: String, value: DBusValue) in
      ExportedProperty(name: name, signature: value.signature, access: .read) { value }
    }
    let method = {
      (
        name: MemberName, signature: Signature,
        body: @escaping @Sendable (MethodInvocation) async throws -> Void
      ) in
      ExportedMethod(name: name, inSignature: signature, outSignature: "") { call in
        try await body(call)
        return []
      }
    }
    let adapter = ExportedInterface(
      name: Adapter1.interface,
      methods: [
        method("SetDiscoveryFilter", "a{sv}") { [weak self] call in
          let fields = call.arguments.first?.stringVariantDictionary ?? [:]
          let uuids = (fields["UUIDs"]?.stringArrayValue ?? []).compactMap {
            try? BluetoothUUID($0)
          }
          self?.state.update { $0.filter = Set(uuids) }
        },
        method("StartDiscovery", "") { [weak self] _ in self?.setDiscovering(true) },
        method("StopDiscovery", "") { [weak self] _ in
          guard let self else { return }
          guard self.isDiscovering else {
            throw DBusError.remote(name: "org.bluez.Error.Failed", message: "No discovery started")
          }
          self.setDiscovering(false)
        },
        method("RemoveDevice", "o") { [weak self] call in
          guard let self, let path = call.arguments.first?.objectPathValue,
            let peripheral = self.state.read({ $0.peripherals.first { $0.path == path } })
          else {
            throw DBusError.remote(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist")
          }
          peripheral.forget()
        },
      ],
      properties: [
        constant("Address", .string(Self.adapterAddress)),
        constant("AddressType", .string("public")),
        constant("Name", .string("blekit-simulated")),
        constant("Alias", .string("blekit-simulated")),
        constant("Powered", .bool(true)),
        constant("Discoverable", .bool(false)),
        constant("Pairable", .bool(false)),
        ExportedProperty(name: "Discovering", signature: "b", access: .read) { [weak self] in
          .bool(self?.isDiscovering ?? false)
        },
        constant("UUIDs", .strings([])),
      ])
    return [adapter, gattManager(), advertisingManager()]
  }

  private func gattManager() -> ExportedInterface {
    ExportedInterface(
      name: GattManager1.interface,
      methods: [
        ExportedMethod(name: "RegisterApplication", inSignature: "oa{sv}", outSignature: "") {
          [weak self] call in
          guard let self, let root = call.arguments.first?.objectPathValue else { return [] }
          // bluetoothd reads the whole tree before it answers.
          _ = try await self.connection.call(
            destination: call.sender, path: root,
            interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
          self.state.update { $0.applications[root] = call.sender }
          return []
        },
        ExportedMethod(name: "UnregisterApplication", inSignature: "o", outSignature: "") {
          [weak self] call in
          guard let root = call.arguments.first?.objectPathValue,
            self?.state.update({ $0.applications.removeValue(forKey: root) }) != nil
          else {
            throw DBusError.remote(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist")
          }
          return []
        },
      ])
  }

  private func advertisingManager() -> ExportedInterface {
    ExportedInterface(
      name: LEAdvertisingManager1.interface,
      methods: [
        ExportedMethod(name: "RegisterAdvertisement", inSignature: "oa{sv}", outSignature: "") {
          [weak self] call in
          guard let self, let path = call.arguments.first?.objectPathValue else { return [] }
          let reply = try await self.connection.call(
            destination: call.sender, path: path, interface: "org.freedesktop.DBus.Properties",
            member: "GetAll", arguments: [.string("org.bluez.LEAdvertisement1")])
          self.state.update {
            $0.advertisements[path] = reply.first?.stringVariantDictionary ?? [:]
          }
          return []
        },
        ExportedMethod(name: "UnregisterAdvertisement", inSignature: "o", outSignature: "") {
          [weak self] call in
          guard let path = call.arguments.first?.objectPathValue,
            self?.state.update({ $0.advertisements.removeValue(forKey: path) }) != nil
          else {
            throw DBusError.remote(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist")
          }
          return []
        },
      ],
      properties: [
        ExportedProperty(name: "ActiveInstances", signature: "y", access: .read) { [weak self] in
          .byte(UInt8(clamping: self?.state.read(\.advertisements.count) ?? 0))
        },
        ExportedProperty(name: "SupportedInstances", signature: "y", access: .read) {
          .byte(4)
        },
        ExportedProperty(name: "SupportedSecondaryChannels", signature: "as", access: .read) {
          .strings(["1M", "2M"])
        },
        ExportedProperty(name: "SupportedIncludes", signature: "as", access: .read) {
          .strings(["tx-power", "appearance", "local-name"])
        },
      ])
  }

  func close() { connection.close() }
}

extension SimulatedPeripheral {
  /// Adapter1.RemoveDevice: the link drops and the object goes; heard again on the next scan.
  func forget() {
    dropLink()
    let host = state.update { state -> SimulationHost? in
      defer { state.exported = false }
      return state.exported ? state.host : nil
    }
    host?.connection.unexport(path)
  }
}
