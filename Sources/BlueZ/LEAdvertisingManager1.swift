// Proxy for org.bluez.LEAdvertisingManager1: registers advertisements and reports capacity.
import DBus

/// An adapter's advertising manager (`org.bluez.LEAdvertisingManager1` at `/org/bluez/hciN`).
public struct LEAdvertisingManager1: Sendable {
  /// The D-Bus interface this proxy calls.
  public static let interface = BlueZ.Interface.advertisingManager

  public let connection: DBusConnection
  /// The adapter's object path, e.g. `/org/bluez/hci1`.
  public let path: ObjectPath

  public init(connection: DBusConnection, adapter path: ObjectPath) {
    self.connection = connection
    self.path = path
  }

  /// What the manager reports about the controller's advertising (all read-only).
  public struct Properties: Sendable, Hashable {
    /// Advertisements registered right now (`ActiveInstances`).
    public var activeInstances: Int
    /// Advertisements that can still be registered (`SupportedInstances`).
    public var supportedInstances: Int
    /// What bluetoothd can add by itself, e.g. "tx-power", "appearance", "local-name".
    public var supportedIncludes: [String]
    /// "1M", "2M", "Coded" (`SupportedSecondaryChannels`, optional).
    public var supportedSecondaryChannels: [String]
    /// "CanSetTxPower", "HardwareOffload" (`SupportedFeatures`, optional).
    public var supportedFeatures: [String]
    /// Whether bluetoothd exposes `SupportedFeatures` at all (even empty). BlueZ 5.66 marks it
    /// and `SupportedCapabilities` experimental, like its reading of an advertisement's
    /// `TxPower`, `MinInterval` and `MaxInterval` (`src/advertising.c`): all four come with
    /// `--experimental` only. 5.82 exposes both properties and reads those options always.
    public var exposesSupportedFeatures: Bool
    /// The longest advertising data the controller takes (`SupportedCapabilities.MaxAdvLen`),
    /// when reported; 31 for legacy advertising.
    public var maxAdvertisingDataLength: Int?
    /// The longest scan response (`SupportedCapabilities.MaxScnRspLen`), when reported.
    public var maxScanResponseLength: Int?
    /// The TX power range in dBm (`SupportedCapabilities.MinTxPower`/`MaxTxPower`), when
    /// reported.
    public var minTxPower: Int?
    public var maxTxPower: Int?

    /// Decodes the interface's properties as `GetAll` or the object tree holds them; `nil`
    /// without the two instance counts. `SupportedSecondaryChannels`, `SupportedFeatures`
    /// and `SupportedCapabilities` are experimental in BlueZ 5.66: absent (empty, `nil`)
    /// unless bluetoothd runs with `--experimental`.
    public init?(_ all: [String: DBusValue]) {
      guard let active = all["ActiveInstances"]?.uint8Value,
        let supported = all["SupportedInstances"]?.uint8Value
      else { return nil }
      let capabilities = all["SupportedCapabilities"]?.stringVariantDictionary
      activeInstances = Int(active)
      supportedInstances = Int(supported)
      supportedIncludes = all["SupportedIncludes"]?.stringArrayValue ?? []
      supportedSecondaryChannels = all["SupportedSecondaryChannels"]?.stringArrayValue ?? []
      supportedFeatures = all["SupportedFeatures"]?.stringArrayValue ?? []
      exposesSupportedFeatures = all["SupportedFeatures"] != nil
      maxAdvertisingDataLength = capabilities?["MaxAdvLen"]?.uint8Value.map(Int.init)
      maxScanResponseLength = capabilities?["MaxScnRspLen"]?.uint8Value.map(Int.init)
      minTxPower = capabilities?["MinTxPower"]?.int16Value.map(Int.init)
      maxTxPower = capabilities?["MaxTxPower"]?.int16Value.map(Int.init)
    }
  }

  /// Reads all properties at once (`org.freedesktop.DBus.Properties.GetAll`).
  public func properties() async throws(BlueZError) -> Properties {
    let all = try await allProperties(of: Self.interface, at: path, on: connection)
    guard let properties = Properties(all) else {
      throw BlueZError(.unexpectedValue, "\(Self.interface) on \(path) lacks the instance counts")
    }
    return properties
  }

  /// Asks bluetoothd to advertise the `org.bluez.LEAdvertisement1` object at `advertisement`.
  /// bluetoothd reads its properties before answering. The corresponding D-Bus member is
  /// `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`.
  public func registerAdvertisement(
    _ advertisement: ObjectPath, options: [String: DBusValue] = [:]
  ) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "RegisterAdvertisement",
        arguments: [.objectPath(advertisement), .dictionaryOfVariants(options)])
    } catch {
      throw BlueZError(error)
    }
  }

  /// Stops an advertisement registered from this connection. The corresponding D-Bus member is
  /// `org.bluez.LEAdvertisingManager1.UnregisterAdvertisement`.
  public func unregisterAdvertisement(_ advertisement: ObjectPath) async throws(BlueZError) {
    do {
      _ = try await connection.call(
        destination: BlueZ.service, path: path, interface: Self.interface,
        member: "UnregisterAdvertisement", arguments: [.objectPath(advertisement)])
    } catch {
      throw BlueZError(error)
    }
  }
}
