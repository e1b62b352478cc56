// What an adapter can do when it advertises (LEAdvertisingManager1's properties), and whether
// it offers passive scanning (AdvertisementMonitorManager1).
import BlueZ

/// An adapter's advertising capabilities, as bluetoothd reports them
/// (`org.bluez.LEAdvertisingManager1`).
///
/// BlueZ 5.66 reports ``features`` and the `SupportedCapabilities`
/// (``maxAdvertisingDataLength``, ``maxScanResponseLength``, the TX power range) only when
/// bluetoothd runs with `--experimental`; they are then empty or `nil`, and the size check
/// uses the 31 bytes of legacy advertising. ``secondaryChannels`` it reports whenever the
/// kernel drives the controller with extended advertising, `--experimental` or not (e.g.
/// `1M 2M Coded`), and not at all for a controller with legacy advertising only.
public struct AdvertisingCapabilities: Sendable, Hashable {
  /// Advertisements that can still be registered.
  public var supportedInstances: Int
  /// Advertisements registered right now.
  public var activeInstances: Int
  /// What bluetoothd can add by itself: `tx-power`, `appearance`, `local-name`.
  public var supportedIncludes: [String]
  /// The secondary channels extended advertising can use (`SupportedSecondaryChannels`);
  /// empty for a controller without extended advertising.
  public var secondaryChannels: [AdvertisingPayload.SecondaryChannel]
  /// `SupportedFeatures`, e.g. `CanSetTxPower`, `HardwareOffload`.
  public var features: [String]
  /// The longest advertising data the controller takes (`SupportedCapabilities.MaxAdvLen`).
  public var maxAdvertisingDataLength: Int?
  /// The longest scan response (`SupportedCapabilities.MaxScnRspLen`).
  public var maxScanResponseLength: Int?
  /// The TX power range, dBm (`SupportedCapabilities.MinTxPower` / `MaxTxPower`).
  public var txPowerRange: ClosedRange<Int>?

  /// The limit the size check uses: ``maxAdvertisingDataLength`` when reported, else the 31
  /// bytes of legacy advertising.
  public var advertisingDataLimit: Int {
    maxAdvertisingDataLength ?? AdvertisingPayload.legacyLimit
  }

  init(_ properties: LEAdvertisingManager1.Properties) {
    supportedInstances = properties.supportedInstances
    activeInstances = properties.activeInstances
    supportedIncludes = properties.supportedIncludes
    secondaryChannels = properties.supportedSecondaryChannels.compactMap(
      AdvertisingPayload.SecondaryChannel.init(rawValue:))
    features = properties.supportedFeatures
    maxAdvertisingDataLength = properties.maxAdvertisingDataLength
    maxScanResponseLength = properties.maxScanResponseLength
    if let low = properties.minTxPower, let high = properties.maxTxPower, low <= high {
      txPowerRange = low...high
    }
  }
}

extension CentralManager {
  /// The advertising capabilities of `adapter`, from bluetoothd's objects; `nil` when it has
  /// no `LEAdvertisingManager1` (no LE, or powered off on some controllers).
  public nonisolated func advertisingCapabilities(of adapter: AdapterInfo)
    -> AdvertisingCapabilities?
  {
    objects.objects[adapter.path]?[LEAdvertisingManager1.interface]
      .flatMap(LEAdvertisingManager1.Properties.init)
      .map(AdvertisingCapabilities.init)
  }

  /// Whether `adapter` offers passive scanning (``ScanMode/passive``): bluetoothd lists
  /// `AdvertisementMonitorManager1` on it, which BlueZ 5.66 does only with `--experimental`.
  public nonisolated func supportsPassiveScanning(_ adapter: AdapterInfo) -> Bool {
    objects.objects[adapter.path]?[AdvertisementMonitorManager1.interface] != nil
  }
}
