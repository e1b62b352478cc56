// Advertising for a PeripheralManager: size checked before registering, one advertisement at
// a time (CoreBluetooth's startAdvertising / stopAdvertising).
import BlueZ
import Bluetooth
import DBus

extension PeripheralManager {
  /// Starts advertising `payload` (`LEAdvertisingManager1.RegisterAdvertisement`), replacing
  /// the current advertisement.
  ///
  /// A connectable advertisement (``AdvertisingPayload/Kind/peripheral``) goes on while
  /// centrals are connected, as CoreBluetooth's does, on an adapter with extended advertising
  /// (``AdvertisingCapabilities/secondaryChannels`` not empty): the controller ends an
  /// advertising set when a central connects through it, and Linux enables it again only
  /// when that central leaves, so the manager registers the advertisement again on each new
  /// link. With legacy advertising, or when bluetoothd refuses, ``events`` reports
  /// ``PeripheralManagerEvent/advertisingPaused(reason:)`` and the adapter advertises again
  /// once the central leaves.
  ///
  /// The size is computed first, against the adapter's
  /// ``AdvertisingCapabilities/advertisingDataLimit`` (its `MaxAdvLen` when bluetoothd reports
  /// it, else the 31 bytes of legacy advertising): when the advertising data does not fit, the
  /// error lists which fields take how many bytes instead of bluetoothd's bare
  /// `org.bluez.Error.Failed`. `txPower` (dBm) and the payload's intervals are requests that
  /// bluetoothd may ignore silently (BlueZ 5.66 without `--experimental`; a TX power on an
  /// adapter without `CanSetTxPower`); ``AdvertisingCapabilities/ignoredRequests(txPower:minInterval:maxInterval:)``
  /// says which, from what the adapter's `LEAdvertisingManager1` exposes.
  /// - Throws: ``BluetoothError/Code/advertisementTooLarge``; ``BluetoothError/Code/notSupported``
  ///   for a secondary channel or an included TX power the adapter does not offer;
  ///   bluetoothd's error.
  public func startAdvertising(_ payload: AdvertisingPayload, txPower: Int16? = nil)
    async
    throws(BluetoothError)
  {
    let capabilities = try await advertisingCapabilities()
    let size = try payload.validateLegacySize(limit: capabilities.advertisingDataLimit)
    let manager = LEAdvertisingManager1(connection: connection, adapter: adapterPath)
    if let channel = payload.secondaryChannel, !capabilities.secondaryChannels.contains(channel) {
      let offered = capabilities.secondaryChannels.map(\.rawValue)
      throw BluetoothError(
        .notSupported,
        "adapter \(adapterName) offers no \(channel.rawValue) secondary channel (supported: "
          + "\(offered.isEmpty ? "none" : offered.joined(separator: ", ")); bluetoothd lists "
          + "them only for controllers with extended advertising)")
    }
    if payload.includesTxPower {
      let supported = capabilities.supportedIncludes
      guard supported.contains("tx-power") else {
        throw .bluez(
          BlueZError(
            .notSupported,
            "adapter \(adapterName) cannot include the TX power (supported includes: "
              + "\(supported.isEmpty ? "none" : supported.joined(separator: ", ")))"))
      }
    }
    // Before the registration, so that no central's link is missed.
    if payload.kind == .peripheral { try await followConnectionsToKeepAdvertising() }
    await stopAdvertising()
    let number = try state.withLock { state throws(BluetoothError) -> Int in
      if state.closed { throw .closed }
      defer { state.nextAdvertisement += 1 }
      return state.nextAdvertisement
    }
    let path = ObjectPath.applicationRoot.appending("advertisement\(number)")
    let events = eventContinuation
    let object = Self.advertisement(payload, txPower: txPower)
    let registration: LEAdvertisementRegistration
    do {
      registration = try await manager.register(
        object, at: path, callerCheck: callerCheck,
        onRelease: { events.yield(.advertisingStopped) })
    } catch {
      if error.code == .failed || error.name == "org.bluez.Error.InvalidLength" {
        // bluetoothd's bare answer; say what the payload holds.
        throw .bluez(
          BlueZError(
            error.code,
            "\(error.message) (advertisement of \(size.advertisingDataLength) "
              + "bytes: \(size.breakdown))", name: error.name))
      }
      throw .bluez(error)
    }
    let stillOpen = state.withLock { state in
      guard !state.closed else { return false }
      state.advertisement = registration
      state.connectableAdvertisement = payload.kind == .peripheral ? object : nil
      state.extendedAdvertising = !capabilities.secondaryChannels.isEmpty
      return true
    }
    if !stillOpen {
      // Closed meanwhile (often by Ctrl-C, which also cancelled this task): undo on our own.
      await runCleanup { await registration.unregister() }
      throw .closed
    }
  }

  /// Stops the current advertisement, if any, also when the calling task was cancelled
  /// (bounded by `runCleanup(within:_:)`).
  public func stopAdvertising() async {
    let registration = state.withLock { state in
      defer {
        state.advertisement = nil
        state.connectableAdvertisement = nil
      }
      return state.advertisement
    }
    guard let registration else { return }
    await runCleanup { await registration.unregister() }
  }

  /// True while an advertisement is registered (and bluetoothd has not released it).
  public var isAdvertising: Bool {
    state.withLock { $0.advertisement?.isRegistered ?? false }
  }

  /// The adapter's advertising capabilities (`LEAdvertisingManager1`'s properties).
  /// The corresponding D-Bus member is `org.freedesktop.DBus.Properties.GetAll`.
  public func advertisingCapabilities() async throws(BluetoothError) -> AdvertisingCapabilities {
    do {
      return AdvertisingCapabilities(
        try await LEAdvertisingManager1(connection: connection, adapter: adapterPath)
          .properties())
    } catch {
      throw .bluez(error)
    }
  }

  /// BlueZ's advertisement object for a payload.
  static func advertisement(_ payload: AdvertisingPayload, txPower: Int16?) -> LEAdvertisement {
    LEAdvertisement(
      type: payload.kind == .peripheral ? .peripheral : .broadcast,
      serviceUUIDs: payload.serviceUUIDs.isEmpty ? nil : payload.serviceUUIDs.map(\.uuidString),
      manufacturerData: payload.manufacturerData.isEmpty ? nil : payload.manufacturerData,
      serviceData: payload.serviceData.isEmpty
        ? nil
        : Dictionary(
          uniqueKeysWithValues: payload.serviceData.map { ($0.key.uuidString, $0.value) }),
      solicitUUIDs: payload.solicitUUIDs.isEmpty ? nil : payload.solicitUUIDs.map(\.uuidString),
      localName: payload.localName,
      includes: payload.includesTxPower ? ["tx-power"] : nil,
      discoverable: payload.kind == .broadcast ? nil : payload.discoverable,
      txPower: txPower,
      appearance: payload.appearance,
      secondaryChannel: payload.secondaryChannel?.rawValue,
      minInterval: payload.minInterval.map(milliseconds),
      maxInterval: payload.maxInterval.map(milliseconds))
  }

  /// Whole milliseconds, as `MinInterval`/`MaxInterval` take them.
  private static func milliseconds(_ duration: Duration) -> UInt32 {
    let (seconds, attoseconds) = duration.components
    return UInt32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
  }
}
