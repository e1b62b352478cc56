// What an adapter can do when it advertises (LEAdvertisingManager1's properties), and whether
// it offers passive scanning (AdvertisementMonitorManager1).
import BlueZ

/// An adapter's advertising capabilities, as bluetoothd reports them
/// (`org.bluez.LEAdvertisingManager1`).
///
/// BlueZ 5.66 reports ``features`` and the `SupportedCapabilities`
/// (``maxAdvertisingDataLength``, ``maxScanResponseLength``, the TX power range) only when
/// bluetoothd runs with `--experimental`; they are then empty or `nil`, and the size check
/// uses the 31 bytes of legacy advertising. BlueZ 5.82 reports them always. Whether they are
/// exposed also tells whether bluetoothd reads an advertisement's TX power and intervals
/// (``honoursParameterRequests``). ``secondaryChannels`` it reports whenever the
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
  /// Whether bluetoothd reads an advertisement's `TxPower`, `MinInterval` and `MaxInterval`:
  /// it exposes `SupportedFeatures`. BlueZ 5.66 gates the property and the reading of those
  /// options behind `--experimental` alike; 5.82 does neither.
  public var honoursParameterRequests: Bool

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
    honoursParameterRequests = properties.exposesSupportedFeatures
    maxAdvertisingDataLength = properties.maxAdvertisingDataLength
    maxScanResponseLength = properties.maxScanResponseLength
    if let low = properties.minTxPower, let high = properties.maxTxPower, low <= high {
      txPowerRange = low...high
    }
  }
}

extension AdvertisingCapabilities {
  /// What bluetoothd would leave out of an advertisement that asks for `txPower` (dBm) and
  /// the intervals, one sentence each; empty when it applies all of them.
  ///
  /// - Without ``honoursParameterRequests`` it reads none of them (BlueZ 5.66 without
  ///   `--experimental`).
  /// - A TX power needs `CanSetTxPower` in ``features`` (the kernel sets it through extended
  ///   advertising parameters).
  /// - An interval is applied only when both ends are given (`src/advertising.c`, 5.66 and
  ///   5.82 alike).
  public func ignoredRequests(txPower: Int16?, minInterval: Duration?, maxInterval: Duration?)
    -> [String]
  {
    let asked = [
      txPower.map { _ in "TxPower" }, minInterval.map { _ in "MinInterval" },
      maxInterval.map { _ in "MaxInterval" },
    ].compactMap { $0 }
    guard !asked.isEmpty else { return [] }
    guard honoursParameterRequests else {
      return [
        "bluetoothd ignores \(asked.joined(separator: ", ")): it reads them only with "
          + "--experimental here (it exposes no SupportedFeatures, as BlueZ 5.66 without "
          + "--experimental; 5.82 reads them always)"
      ]
    }
    var ignored: [String] = []
    if txPower != nil && !features.contains("CanSetTxPower") {
      ignored.append(
        "bluetoothd ignores TxPower: the adapter cannot set it (SupportedFeatures lacks "
          + "CanSetTxPower)")
    }
    if (minInterval == nil) != (maxInterval == nil) {
      ignored.append(
        "bluetoothd ignores \(minInterval == nil ? "MaxInterval" : "MinInterval"): it applies "
          + "an advertising interval only when both MinInterval and MaxInterval are given")
    }
    return ignored
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
