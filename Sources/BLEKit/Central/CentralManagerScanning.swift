// Scanning: SetDiscoveryFilter + StartDiscovery, with the same filters re-applied client-side.
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// What to scan for (CoreBluetooth's `scanForPeripherals(withServices:options:)`).
public struct ScanOptions: Sendable, Hashable {
  /// Report only peripherals advertising at least one of these services; empty means any.
  public var services: [BluetoothUUID]
  /// Report every advertisement (`true`) or each peripheral once per scan (`false`), as
  /// CoreBluetooth's `CBCentralManagerScanOptionAllowDuplicatesKey`.
  public var allowDuplicates: Bool
  /// The RSSI threshold and what it does with an unknown RSSI (see `RSSIFilter`).
  public var rssi: RSSIFilter
  /// Also report peripherals bluetoothd already knows when the scan starts (it may not report
  /// a still-advertising peripheral again). Default `true`.
  public var includeKnownPeripherals: Bool
  /// Restart the discovery session at this interval (`nil`: never). Linux enables LE scanning
  /// with the controller's duplicate filter, so an advertiser whose advertisement does not
  /// change is reported once per scan enable (and again when the kernel ends a discovery after
  /// 10.24 s and bluetoothd starts it again); a restart resets the filter, so a scan that
  /// counts sightings (``allowDuplicates``) sees each advertiser at least this often. A
  /// restart costs a few milliseconds of scanning.
  public var restartInterval: Duration?
  /// End the scan by itself after this long (`nil`: run until stopped). The scan then ends
  /// normally, without an error.
  public var timeout: Duration?
  /// When bluetoothd stops, wait up to this long for it to return with the adapter powered and
  /// scan again (`nil`: the scan ends with bluetoothd's leaving). Peripherals are reported again
  /// after the restart (bluetoothd forgot them).
  public var resumeWithin: Duration?
  /// Report only peripherals whose manufacturer data carries one of these company IDs; empty
  /// means any.
  public var manufacturerIDs: [UInt16]
  /// Active discovery (default) or passive monitoring (see ``ScanMode``). A passive scan
  /// ignores ``restartInterval`` and ``includeKnownPeripherals`` (it reports what bluetoothd's
  /// monitor finds from its start on).
  public var mode: ScanMode

  public init(
    services: [BluetoothUUID] = [], allowDuplicates: Bool = false, rssi: RSSIFilter = .none,
    includeKnownPeripherals: Bool = true, restartInterval: Duration? = nil,
    timeout: Duration? = nil, resumeWithin: Duration? = nil, manufacturerIDs: [UInt16] = [],
    mode: ScanMode = .active
  ) {
    self.manufacturerIDs = manufacturerIDs
    self.mode = mode
    self.services = services
    self.allowDuplicates = allowDuplicates
    self.rssi = rssi
    self.includeKnownPeripherals = includeKnownPeripherals
    self.restartInterval = restartInterval
    self.timeout = timeout
    self.resumeWithin = resumeWithin
  }

  /// The filter for `Adapter1.SetDiscoveryFilter`: transport LE, and the same UUIDs, RSSI
  /// threshold and duplicate setting.
  var discoveryFilter: DiscoveryFilter {
    DiscoveryFilter(
      uuids: services.map(\.uuidString), rssi: rssi.minimum.map { Int16($0) }, transport: "le",
      duplicateData: allowDuplicates)
  }

  /// Whether a device passes the filters on our side (bluetoothd merges every client's filter,
  /// so it may report more than we asked for).
  func admits(_ discovery: Discovery) -> Bool {
    // A handful of UUIDs on each side: comparing them beats hashing them into a set.
    // A service is advertised in a UUID list or as the key of service data (which bluetoothd
    // does not add to the device's UUIDs).
    if !services.isEmpty,
      !services.contains(where: {
        discovery.serviceUUIDs.contains($0) || discovery.serviceData[$0] != nil
      })
    {
      return false
    }
    if !manufacturerIDs.isEmpty,
      !manufacturerIDs.contains(where: { discovery.manufacturerData[$0] != nil })
    {
      return false
    }
    return rssi.admits(discovery.reportedRSSI)
  }
}

/// The discoveries of one scan, in the order bluetoothd reported them.
///
/// The scan runs while the sequence is iterated: ``stop()``, ending the iteration (or
/// cancelling the task, or dropping the sequence) stops this client's discovery session, and so
/// does ``ScanOptions/timeout``. The sequence ends with an error when the adapter is powered off
/// or removed, or bluetoothd goes away (and, with ``ScanOptions/resumeWithin``, does not return
/// in time).
///
/// At most ``bufferLimit`` discoveries wait for a consumer that falls behind (a flooding
/// advertiser with `allowDuplicates`); beyond that the oldest waiting one is dropped, so
/// memory stays bounded, and ``droppedCount`` says how many were.
public struct DiscoveryStream: AsyncSequence, Sendable {
  public typealias Element = Discovery
  public typealias Failure = any Error
  /// Discoveries kept for a consumer that falls behind.
  public static let bufferLimit = 4096

  let stream: AsyncThrowingStream<Discovery, any Error>
  let drops: DropCounter
  let continuation: AsyncThrowingStream<Discovery, any Error>.Continuation

  /// Stops the scan: the sequence ends (without an error) after the discoveries already
  /// waiting, and this client's discovery session ends shortly after.
  public func stop() { continuation.finish() }

  /// Discoveries dropped so far because the consumer fell ``bufferLimit`` behind.
  public var droppedCount: Int { drops.count }

  public func makeAsyncIterator() -> AsyncThrowingStream<Discovery, any Error>.Iterator {
    stream.makeAsyncIterator()
  }

  /// A bounded stream and the function that feeds it, counting what it drops.
  static func make() -> (
    DiscoveryStream, AsyncThrowingStream<Discovery, any Error>.Continuation,
    @Sendable (Discovery) -> Void
  ) {
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: Discovery.self, throwing: (any Error).self,
      bufferingPolicy: .bufferingNewest(bufferLimit))
    let drops = DropCounter()
    let feed: @Sendable (Discovery) -> Void = { discovery in
      if case .dropped = continuation.yield(discovery) { drops.add() }
    }
    return (
      DiscoveryStream(stream: stream, drops: drops, continuation: continuation), continuation,
      feed
    )
  }
}

/// How many elements a bounded stream dropped.
final class DropCounter: Sendable {
  private let value = Atomic(0)
  var count: Int { value.load(ordering: .relaxed) }
  func add() { value.add(1, ordering: .relaxed) }
}

extension CentralManager {
  /// Scans for peripherals (CoreBluetooth's `scanForPeripherals(withServices:options:)`). The
  /// corresponding D-Bus members are `org.bluez.Adapter1.SetDiscoveryFilter` and
  /// `StartDiscovery`; `StopDiscovery` runs when the scan ends.
  ///
  /// A discovery is filtered and handed to the stream where bluetoothd's signal is read, so
  /// the task iterating the stream is the only one woken for it. With
  /// ``ScanOptions/resumeWithin``, `onInterruption` is told when the scan pauses for a
  /// bluetoothd restart and when it resumes.
  ///
  /// The stream ends with ``BluetoothError/Code/serviceUnavailable`` when bluetoothd does not
  /// return in time, with the scan's own error for a power-off or a removed adapter, and at
  /// once with ``BluetoothError/Code/busLost`` when the connection to the system bus is lost.
  ///
  /// - Throws: the state's error when not powered on; ``BluetoothError/Code/scanInProgress``
  ///   when this manager already scans; bluetoothd's error for the filter or the start.
  public func scan(
    _ options: ScanOptions = ScanOptions(),
    onInterruption: @escaping @Sendable (BluetoothdInterruption) -> Void = { _ in }
  ) async throws(BluetoothError) -> DiscoveryStream {
    let (discoveries, continuation, feed) = DiscoveryStream.make()
    let stopScan: @Sendable () -> Void
    if options.resumeWithin != nil {
      let supervisor = try await superviseScan(
        options, onInterruption: onInterruption, deliver: feed,
        finish: { error in continuation.finish(throwing: error) })
      stopScan = { supervisor.cancel() }
    } else {
      let session = try await startScan(
        options,
        sink: ScanSink(yield: feed, end: { continuation.finish(throwing: $0.error) }))
      stopScan = {
        session.cancel()
        Task { await session.stop() }
      }
    }
    let timer = options.timeout.map { limit in
      Task {
        try? await Task.sleep(for: limit)
        if !Task.isCancelled { continuation.finish() }
      }
    }
    continuation.onTermination = { _ in
      timer?.cancel()
      stopScan()
    }
    return discoveries
  }

  /// Starts a discovery session that reports to `sink`: observes the object tree, sets the
  /// filter, starts discovery (and the periodic restart, if asked). The caller stops it.
  func startScan(_ options: ScanOptions, sink: ScanSink) async throws(BluetoothError)
    -> ScanSession
  {
    if options.mode.isPassive { return try await startPassiveScan(options, sink: sink) }
    let adapter = try await adapter()
    guard claimScanSlot() else {
      throw BluetoothError(.scanInProgress, "a scan is already running on this central")
    }
    let session = ScanSession(
      manager: self, adapter: adapter, adapterName: adapterName, options: options, sink: sink)
    // Observed before the start, so nothing reported in between is missed; what arrives before
    // the start succeeds is held back and dropped if it fails.
    session.observe(objects)
    session.prepareRestarts()
    do throws(BlueZError) {
      try await adapter.setDiscoveryFilter(options.discoveryFilter)
      do throws(BlueZError) {
        try await adapter.startDiscovery(timeout: Self.startDiscoveryReplyWait)
      } catch  where error.code == .inProgress {
        // A session of ours left over (e.g. a scan whose stop is still in flight): restart it.
        try? await adapter.stopDiscovery()
        try await adapter.setDiscoveryFilter(options.discoveryFilter)
        try await adapter.startDiscovery()
      } catch  where error.code == .timeout {
        // bluetoothd (5.66, 5.82) answers only one of several StartDiscovery calls that wait
        // for the same start (src/adapter.c keeps one pending caller per adapter, the
        // latest); the others' sessions are registered and run, unanswered. The adapter's
        // Discovering tells.
        guard await adapterBecomesDiscovering(adapter.path, within: Self.startDiscoveryLimit)
        else { throw error }
      }
    } catch {
      session.cancel()
      freeScanSlot()
      throw BluetoothError(error, while: "starting discovery on \(adapterName)")
    }
    session.started()
    return session
  }

  func scanEnded() {
    freeScanSlot()
  }

  /// How long a StartDiscovery reply is waited for before the adapter's Discovering is asked.
  static let startDiscoveryReplyWait: Duration = .seconds(5)
  /// How long the adapter then gets to report Discovering.
  static let startDiscoveryLimit: Duration = .seconds(20)

  /// Whether the adapter at `path` reports Discovering within `limit` (bluetoothd's view, kept
  /// current by the object tree): the tree's snapshot, then its changes to that adapter.
  func adapterBecomesDiscovering(_ path: ObjectPath, within limit: Duration) async -> Bool {
    let (snapshot, _, events) = objects.subscribe { event in
      if case .propertiesChanged(path, Adapter1.interface, _, _, _) = event { return true }
      if case .interfacesRemoved(path, _) = event { return true }
      if case .serviceStopped = event { return true }
      return false
    }
    if snapshot[path]?[Adapter1.interface]?[Adapter1.discovering.name]?.boolValue == true {
      return true
    }
    return await firstMatch(in: events, within: limit) { event -> Bool? in
      switch event {
      case .propertiesChanged(_, _, _, _, let current):
        current[Adapter1.discovering.name]?.boolValue == true ? true : nil
      default: false
      }
    } ?? false
  }
}

/// The client-side half of a scan's filtering: which devices match, and which were reported.
struct DiscoveryFilterState {
  let options: ScanOptions
  let adapter: ObjectPath
  var reported: Set<ObjectPath> = []
  /// A passive session's devices found by its monitor (only these are reported); `nil` for an
  /// active session.
  var monitored: Set<ObjectPath>?

  init(options: ScanOptions, adapter: ObjectPath) {
    self.options = options
    self.adapter = adapter
  }

  /// The discovery to report for this device state, or `nil` to stay quiet.
  /// `advertisement` is decoded only if the path passes the first checks.
  mutating func consider(_ path: ObjectPath, _ advertisement: () -> DeviceAdvertisement?)
    -> Discovery?
  {
    guard path.isDescendant(of: adapter) else { return nil }
    if let monitored, !monitored.contains(path) { return nil }
    guard !options.allowDuplicates ? !reported.contains(path) : true else { return nil }
    guard
      let advertised = advertisement(),
      advertised.adapter == adapter,
      let discovery = Discovery(advertised, path: path, at: .now),
      options.admits(discovery)
    else { return nil }
    reported.insert(path)
    return discovery
  }

  /// A device object went away: if it comes back, it is reported again.
  mutating func forget(_ path: ObjectPath) {
    reported.remove(path)
  }
}
