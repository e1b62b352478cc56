// org.bluez.Adapter1: a local controller; discovery, its filter, powering, removing devices.
import DBus

/// A typed proxy for `org.bluez.Adapter1` (BlueZ's `doc/org.bluez.Adapter.rst`).
public struct Adapter1: BlueZProxy {
  public static let interface = BlueZ.Interface.adapter

  public let snapshot: ProxySnapshot
  public init(snapshot: ProxySnapshot) { self.snapshot = snapshot }

  // MARK: Properties

  /// The controller's address, e.g. `00:AA:01:00:00:00`.
  public static let address = ProxyProperty<Self, String>(
    "Address", "s", required: true, decode: Decode.string)
  /// `public` or `random`.
  public static let addressType = ProxyProperty<Self, String>(
    "AddressType", "s", decode: Decode.string)
  public static let name = ProxyProperty<Self, String>("Name", "s", decode: Decode.string)
  public static let alias = ProxyProperty<Self, String>("Alias", "s", decode: Decode.string)
  /// Whether the controller is switched on. Writable.
  public static let powered = ProxyProperty<Self, Bool>(
    "Powered", "b", required: true, decode: Decode.bool)
  /// `on`, `off`, `off-enabling`, `on-disabling`, `off-blocked` (BlueZ 5.64 and later).
  public static let powerState = ProxyProperty<Self, String>(
    "PowerState", "s", decode: Decode.string)
  public static let discoverable = ProxyProperty<Self, Bool>(
    "Discoverable", "b", decode: Decode.bool)
  public static let pairable = ProxyProperty<Self, Bool>("Pairable", "b", decode: Decode.bool)
  /// Whether any client's discovery session is running on this adapter.
  public static let discovering = ProxyProperty<Self, Bool>(
    "Discovering", "b", required: true, decode: Decode.bool)
  public static let uuids = ProxyProperty<Self, [String]>("UUIDs", "as", decode: Decode.strings)
  /// `central`, `peripheral`, `central-peripheral`.
  public static let roles = ProxyProperty<Self, [String]>("Roles", "as", decode: Decode.strings)
  public static let modalias = ProxyProperty<Self, String>("Modalias", "s", decode: Decode.string)

  public static let propertyTable: [PropertyRow] = [
    address.row, addressType.row, name.row, alias.row, powered.row, powerState.row,
    discoverable.row, pairable.row, discovering.row, uuids.row, roles.row, modalias.row,
  ]

  /// The adapter's short name, the last path component (e.g. `hci0`).
  public var adapterName: String {
    path.lastComponent
  }

  // MARK: Methods

  /// Starts this client's discovery session; `timeout` bounds the wait for the reply.
  /// The corresponding D-Bus member is `org.bluez.Adapter1.StartDiscovery`.
  public func startDiscovery(timeout: Duration = .seconds(25)) async throws(BlueZError) {
    _ = try await call("StartDiscovery", timeout: timeout)
  }

  /// Stops this client's discovery session.
  /// The corresponding D-Bus member is `org.bluez.Adapter1.StopDiscovery`.
  public func stopDiscovery() async throws(BlueZError) {
    _ = try await call("StopDiscovery")
  }

  /// Sets this client's discovery filter; bluetoothd merges the filters of all its clients.
  /// The corresponding D-Bus member is `org.bluez.Adapter1.SetDiscoveryFilter`.
  public func setDiscoveryFilter(_ filter: DiscoveryFilter) async throws(BlueZError) {
    _ = try await call("SetDiscoveryFilter", [filter.dbusValue])
  }

  /// Removes a device object and its bonding information.
  /// The corresponding D-Bus member is `org.bluez.Adapter1.RemoveDevice`.
  public func removeDevice(_ device: ObjectPath) async throws(BlueZError) {
    _ = try await call("RemoveDevice", [.objectPath(device)])
  }

  /// Switches the controller on or off through `Properties.Set(Powered)`.
  public func setPowered(_ on: Bool) async throws(BlueZError) {
    try await set(Self.powered, to: .bool(on))
  }
}

/// The argument of `Adapter1.SetDiscoveryFilter`; `nil` fields are left out.
public struct DiscoveryFilter: Sendable, Hashable {
  /// Service UUIDs (strings as BlueZ takes them); empty means any device.
  public var uuids: [String]
  /// Report only devices heard at or above this RSSI (dBm).
  public var rssi: Int16?
  /// `le`, `bredr` or `auto`.
  public var transport: String?
  /// Report every advertisement, not only changes.
  public var duplicateData: Bool?

  public init(
    uuids: [String] = [], rssi: Int16? = nil, transport: String? = "le", duplicateData: Bool? = nil
  ) {
    self.uuids = uuids
    self.rssi = rssi
    self.transport = transport
    self.duplicateData = duplicateData
  }

  /// The `a{sv}` that SetDiscoveryFilter takes.
  public var dbusValue: DBusValue {
    var fields: [String: DBusValue] = [:]
    if !uuids.isEmpty {
      fields["UUIDs"] = .array(element: "s", uuids.map { .string($0) })
    }
    if let rssi { fields["RSSI"] = .int16(rssi) }
    if let transport { fields["Transport"] = .string(transport) }
    if let duplicateData { fields["DuplicateData"] = .bool(duplicateData) }
    return .dictionaryOfVariants(fields)
  }
}
