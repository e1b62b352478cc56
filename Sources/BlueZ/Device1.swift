// org.bluez.Device1: a remote device; its advertised data, connection and pairing.
import DBus

/// A typed proxy for `org.bluez.Device1` (BlueZ's `doc/org.bluez.Device.rst`).
public struct Device1: BlueZProxy {
  public static let interface = BlueZ.Interface.device

  public let snapshot: ProxySnapshot
  public init(snapshot: ProxySnapshot) { self.snapshot = snapshot }

  // MARK: Properties

  /// The device's address, e.g. `00:AA:01:01:00:01`.
  public static let address = ProxyProperty<Self, String>(
    "Address", "s", required: true, decode: Decode.string)
  /// `public` or `random`.
  public static let addressType = ProxyProperty<Self, String>(
    "AddressType", "s", decode: Decode.string)
  /// The remote name, when the device sent one.
  public static let name = ProxyProperty<Self, String>("Name", "s", decode: Decode.string)
  /// The name to show: the user's alias, else the name, else the address with dashes.
  public static let alias = ProxyProperty<Self, String>("Alias", "s", decode: Decode.string)
  /// The adapter this device was seen on.
  public static let adapter = ProxyProperty<Self, ObjectPath>(
    "Adapter", "o", required: true, decode: Decode.path)
  /// The last inquiry or advertising RSSI in dBm; absent when not discovering.
  public static let rssi = ProxyProperty<Self, Int16>("RSSI", "n", decode: Decode.int16)
  /// The advertised transmit power in dBm.
  public static let txPower = ProxyProperty<Self, Int16>("TxPower", "n", decode: Decode.int16)
  /// Advertised (and, once resolved, GATT) service UUIDs, lowercase 128-bit strings.
  public static let uuids = ProxyProperty<Self, [String]>("UUIDs", "as", decode: Decode.strings)
  /// Manufacturer data keyed by company identifier (`a{qv}`).
  public static let manufacturerData = ProxyProperty<Self, [UInt16: [UInt8]]>(
    "ManufacturerData", "a{qv}", decode: Decode.bytesByUInt16)
  /// Service data keyed by service UUID string (`a{sv}`).
  public static let serviceData = ProxyProperty<Self, [String: [UInt8]]>(
    "ServiceData", "a{sv}", decode: Decode.bytesByString)
  public static let appearance = ProxyProperty<Self, UInt16>(
    "Appearance", "q", decode: Decode.uint16)
  public static let connected = ProxyProperty<Self, Bool>(
    "Connected", "b", required: true, decode: Decode.bool)
  /// Whether GATT discovery of the remote services is complete.
  public static let servicesResolved = ProxyProperty<Self, Bool>(
    "ServicesResolved", "b", decode: Decode.bool)
  public static let paired = ProxyProperty<Self, Bool>("Paired", "b", decode: Decode.bool)
  /// Whether keys were stored (BlueZ 5.66 and later).
  public static let bonded = ProxyProperty<Self, Bool>("Bonded", "b", decode: Decode.bool)
  public static let trusted = ProxyProperty<Self, Bool>("Trusted", "b", decode: Decode.bool)
  public static let blocked = ProxyProperty<Self, Bool>("Blocked", "b", decode: Decode.bool)
  public static let advertisingFlags = ProxyProperty<Self, [UInt8]>(
    "AdvertisingFlags", "ay", decode: Decode.bytes)

  public static let propertyTable: [PropertyRow] = [
    address.row, addressType.row, name.row, alias.row, adapter.row, rssi.row, txPower.row,
    uuids.row, manufacturerData.row, serviceData.row, appearance.row, connected.row,
    servicesResolved.row, paired.row, bonded.row, trusted.row, blocked.row,
    advertisingFlags.row,
  ]

  // MARK: Methods

  /// Connects to the device (for LE: creates the link and starts GATT discovery).
  /// The corresponding D-Bus member is `org.bluez.Device1.Connect`.
  public func connect(timeout: Duration = .seconds(25)) async throws(BlueZError) {
    _ = try await call("Connect", timeout: timeout)
  }

  /// Disconnects the device (also cancels a pending connection attempt).
  /// The corresponding D-Bus member is `org.bluez.Device1.Disconnect`.
  public func disconnect() async throws(BlueZError) {
    _ = try await call("Disconnect")
  }

  /// Pairs with the device; an agent may be asked for confirmation.
  /// The corresponding D-Bus member is `org.bluez.Device1.Pair`.
  public func pair(timeout: Duration = .seconds(60)) async throws(BlueZError) {
    _ = try await call("Pair", timeout: timeout)
  }

  /// Cancels a pairing in progress.
  /// The corresponding D-Bus member is `org.bluez.Device1.CancelPairing`.
  public func cancelPairing() async throws(BlueZError) {
    _ = try await call("CancelPairing")
  }

  /// Sets the Trusted property.
  public func setTrusted(_ trusted: Bool) async throws(BlueZError) {
    try await set(Self.trusted, to: .bool(trusted))
  }
}
