// TransferCentral: the receiver side of the transfer service (the sample's central): find,
// connect, subscribe (sequenced framing when offered, else plain chunks + EOM), reply, clean up.
import BlueZ
import Bluetooth
import Synchronization

/// Receives the transfer service's message from a peripheral, as the sample's central does.
///
/// Between two blekit ends the message travels on blekit's sequenced characteristic, whose
/// frames are numbered and CRC-checked, so reordering across EATT bearers cannot corrupt it.
/// With a plain peer (only Apple's sample characteristic) the chunks carry no sequence
/// numbers: on BlueZ with EATT (`[GATT] Channels` > 1, the default of 5.66) notifications can
/// arrive out of order and the message can be wrong without any sign. So before subscribing
/// to a plain peer, ``receive(from:options:)`` decides from facts whether the order is
/// guaranteed (see ``TransferOrder``) and, when it is not, refuses with
/// ``BluetoothError/Code/orderNotGuaranteed`` unless ``Options/acceptUnordered`` is set.
public struct TransferCentral: Sendable {
  /// Which characteristic carried the message.
  public typealias Framing = TransferPeripheral.Framing

  /// A message received in full.
  public struct Received: Sendable {
    /// The message, exactly as sent.
    public var bytes: [UInt8]
    /// Its size in bytes.
    public var byteCount: Int { bytes.count }
    /// The message as text, or `nil` when its bytes are not UTF-8.
    public var text: String? { String(validating: bytes, as: UTF8.self) }
    /// Which framing carried it.
    public var framing: Framing
    /// Whether the bytes are known to be in the order they were sent, and why.
    public var order: TransferOrder
    /// How the notifications arrived.
    public var method: NotificationMethod
    /// From the subscription to the last byte.
    public var duration: Duration
    /// The peripheral it came from.
    public var peripheral: PeripheralIdentifier
    /// Frames that arrived out of order and were put back in place (sequenced framing only).
    public var framesOutOfOrder: Int
    /// The most kernel memory the AcquireNotify socket's unread values held, in bytes (`nil`
    /// for StartNotify): how far the receiver fell behind bluetoothd (see
    /// ``NotificationStream/lossCheck()``; plain messages are refused from two fifths of
    /// bluetoothd's send buffer, 85,196 bytes by default).
    public var socketBacklogPeak: Int?
  }

  /// How a receive behaves.
  public struct Options: Sendable {
    /// The reply to write without response once the message is in, as in the sample.
    public var reply: String?
    /// How long the connection may take (retries included).
    public var connectTimeout: Duration
    /// How long the transfer may go without progress (a new message byte) before it counts
    /// as cut. Notifications that bring nothing new (an empty value, a frame received twice)
    /// are not progress.
    public var idleTimeout: Duration
    /// How long the transfer may take in all, from the subscription, before it counts as cut
    /// (``TransferDeadlines/defaultDeadline`` unless set).
    public var deadline: Duration = TransferDeadlines.defaultDeadline
    /// Called with the message bytes received so far, after each notification or batch of
    /// notifications (the values one read of bluetoothd's socket brought together). It runs on
    /// a task of the transfer's own, never on the socket reader's thread or under its lock; a
    /// slow callback sees only the latest count (counts in between are skipped, none is
    /// reported out of order).
    public var progress: (@Sendable (Int) -> Void)?
    /// Called with a warning the user should see (e.g. a plain peer's unguaranteed order,
    /// accepted with ``acceptUnordered``).
    public var warning: (@Sendable (String) -> Void)?
    /// Receive plain chunks even when their order is not guaranteed (the message may then be
    /// wrong; ``Received/order`` says so). Off by default: such a receive throws
    /// ``BluetoothError/Code/orderNotGuaranteed`` before subscribing.
    public var acceptUnordered: Bool
    /// Called once the subscription is in place, before the first value is read:
    /// ``Received/duration`` is measured from this moment. A receive that connects again after
    /// a failed setup calls it once per subscription.
    public var subscribed: (@Sendable () -> Void)?

    public init(
      reply: String? = nil, connectTimeout: Duration = .seconds(30),
      idleTimeout: Duration = TransferDeadlines.defaultIdleTimeout,
      progress: (@Sendable (Int) -> Void)? = nil,
      warning: (@Sendable (String) -> Void)? = nil, acceptUnordered: Bool = false
    ) {
      self.reply = reply
      self.connectTimeout = connectTimeout
      self.idleTimeout = idleTimeout
      self.progress = progress
      self.warning = warning
      self.acceptUnordered = acceptUnordered
    }
  }

  /// The warning given when plain chunks of unguaranteed order are accepted.
  public static func unorderedWarning(_ order: TransferOrder) -> String {
    "warning: the message may be wrong: the peer sends plain chunks without sequence numbers "
      + "and their order is not guaranteed (\(order.reason))"
  }

  public let manager: CentralManager

  public init(manager: CentralManager) {
    self.manager = manager
  }

  /// Scans for a peripheral advertising the transfer service and returns the first that
  /// passes `rssi`. The scan stops before this returns.
  /// - Throws: ``BluetoothError/Code/timeout`` when none is found within `timeout`.
  ///
  /// Cached, unconnected and unpaired devices are removed first (see
  /// ``CentralManager/removeCachedPeripherals()``): bluetoothd would otherwise keep the service
  /// UUIDs of an earlier connection and hide a peer that serves the transfer service again.
  ///
  /// The scan is one discovery session, never restarted from here: every restart leaves a
  /// moment with scanning off, and a controller that reports an advertiser only when its
  /// advertising switches on misses one that does so in that moment. Nor does a restart help
  /// on a real controller: Linux enables LE scanning with the controller's duplicate filter,
  /// which each enable resets, and ends an LE-only discovery after 10.24 s
  /// (`DISCOV_LE_TIMEOUT`); bluetoothd (5.66, 5.82) then starts it again at once for a client
  /// with a discovery filter (this scan sets one), so every advertiser in range is reported
  /// again at least that often.
  public func findPeer(rssi: RSSIFilter = .none, timeout: Duration) async throws -> Discovery {
    await manager.removeCachedPeripherals()
    let scan = try await manager.scan(
      ScanOptions(services: [BlekitUUID.transferService], rssi: rssi))
    return try await withThrowingTaskGroup(of: Discovery?.self) { group in
      group.addTask {
        for try await discovery in scan { return discovery }
        return nil
      }
      group.addTask {
        try await Task.sleep(for: timeout)
        return nil
      }
      defer { group.cancelAll() }
      guard let first = try await group.next(), let discovery = first else {
        throw BluetoothError(
          .timeout,
          "no peripheral advertising the transfer service was found within \(timeout)")
      }
      return discovery
    }
  }

  /// Connects to `peer`, subscribes, receives one message, writes the reply (if any), then
  /// unsubscribes and disconnects, whatever happened.
  ///
  /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/transferInterrupted`` when the
  ///   transfer stops before its end (``BluetoothError/interruptedTransfer`` holds the bytes
  ///   received so far), with other codes for connection and GATT failures; `BluetoothError`
  ///   for a message that fails its checks, for plain chunks whose order is not guaranteed
  ///   (``BluetoothError/Code/orderNotGuaranteed``, unless ``Options/acceptUnordered``), or for
  ///   plain chunks of which bluetoothd or the kernel may have dropped some
  ///   (``BluetoothError/Code/chunksMayBeLost``, see ``NotificationStream/lossCheck()``).
  ///
  /// A connection whose setup fails before the subscription is made (the link lost, or
  /// bluetoothd not answering the service reads or the subscription) is tried again on a fresh
  /// connection, up to ``setupAttempts`` connections in all: bluetoothd 5.66 on a bonded peer
  /// was seen dropping its ATT bearer on reconnection (the link's encryption took effect
  /// between its reading and its raising of the socket's security level, and the kernel
  /// answers EINVAL to a raise that is already met), which stalls the link's GATT client
  /// until ATT's 30 s timeout; the local bluetoothd then never answers the pending
  /// AcquireNotify, and either drops the link or keeps it with a client that cannot work. Each
  /// retry is reported through ``Options/warning``; a failure after the subscription is never
  /// retried (bytes may have arrived).
  public func receive(from peer: PeripheralIdentifier, options: Options = Options())
    async throws -> Received
  {
    var attempt = 1
    while true {
      var stage = SetupStage.connecting
      do {
        return try await receiveOnce(from: peer, options: options) { stage = $0 }
      } catch let error as BluetoothError
        where stage == .connected && [.disconnected, .timeout].contains(error.code)
        && !Task.isCancelled && attempt < Self.setupAttempts
      {
        attempt += 1
        options.warning?(
          "\(error.message); connecting to \(peer) again (attempt \(attempt) of "
            + "\(Self.setupAttempts))")
      }
    }
  }

  /// How many connections ``receive(from:options:)`` makes at most when the setup of one fails
  /// before the subscription. Each failed setup costs at most the connection's own time plus
  /// the 40 s a GATT call may take, so a peer that never answers ends the receive within about
  /// two minutes plus the connections.
  public static let setupAttempts = 3

  /// How far one attempt of ``receive(from:options:)`` got.
  private enum SetupStage { case connecting, connected, subscribed }

  private func receiveOnce(
    from peer: PeripheralIdentifier, options: Options, reached: (SetupStage) -> Void
  ) async throws -> Received {
    let peripheral = try await manager.connect(to: peer, timeout: options.connectTimeout)
    reached(.connected)
    do {
      let received = try await receive(on: peripheral, options: options) { reached(.subscribed) }
      await peripheral.disconnectOnExit()
      return received
    } catch let error as BluetoothError {
      await peripheral.disconnectOnExit()
      throw await explainCut(error)
    } catch {
      await peripheral.disconnectOnExit()
      throw error
    }
  }

  /// How long a cut transfer waits to learn that its adapter went away: bluetoothd removes an
  /// adapter's devices (which ends their transfers) just before the adapter itself.
  static let adapterRemovalNotice: Duration = .seconds(1)

  /// A cut whose cause is unknown or a disconnection gets ``BluetoothError/Code/adapterNotFound``
  /// as its cause when the adapter was removed under it (a USB adapter unplugged). A stopping
  /// bluetoothd removes its adapters too and then leaves the bus, so a removal counts only
  /// when bluetoothd stays (``PeripheralManager/powerOffGrace``, as for the peripheral).
  private func explainCut(_ error: BluetoothError) async -> BluetoothError {
    guard error.code == .transferInterrupted, let cut = error.interruptedTransfer,
      cut.cause == nil || cut.cause == .disconnected
    else { return error }
    let gone: Set<CentralState> = [.unsupported, .serviceUnavailable]
    guard await manager.becomes(gone, within: Self.adapterRemovalNotice),
      await manager.state == .unsupported
    else { return error }
    let back: Set<CentralState> = [.serviceUnavailable, .poweredOn, .poweredOff]
    if await manager.becomes(back, within: PeripheralManager.powerOffGrace) { return error }
    let adapter = await manager.adapterName
    return .transferInterrupted(
      bytesReceived: cut.bytesReceived, chunksReceived: cut.chunksReceived,
      cause: BluetoothError(.adapterNotFound, "adapter \(adapter) was removed"))
  }

  /// Receives one message on an already connected peripheral (no disconnect at the end).
  public func receive(on peripheral: Peripheral, options: Options = Options()) async throws
    -> Received
  {
    try await receive(on: peripheral, options: options, onSubscribed: {})
  }

  private func receive(
    on peripheral: Peripheral, options: Options, onSubscribed: () -> Void
  ) async throws -> Received {
    guard let service = try await transferService(of: peripheral) else {
      throw BluetoothError(
        .attributeNotFound, "\(peripheral.identifier) does not offer the transfer service")
    }
    let characteristics = try await peripheral.characteristics(
      [BlekitUUID.transferCharacteristic, BlekitUUID.sequencedTransferCharacteristic],
      for: service)
    let plain = characteristics.first { $0.uuid == BlekitUUID.transferCharacteristic }
    let sequenced = characteristics.first {
      $0.uuid == BlekitUUID.sequencedTransferCharacteristic
        && !$0.properties.isDisjoint(with: [.notify, .indicate])
    }
    let framing: Framing
    let source: RemoteCharacteristic
    let order: TransferOrder
    if let sequenced {
      framing = .sequenced
      source = sequenced
      order = .sequenced
    } else if let plain {
      framing = .plain
      source = plain
      order = await plainOrder(on: peripheral)
      if !order.isGuaranteed {
        guard options.acceptUnordered else { throw BluetoothError.orderNotGuaranteed(order.reason) }
        options.warning?(Self.unorderedWarning(order))
      }
    } else {
      throw BluetoothError(
        .attributeNotFound,
        "\(peripheral.identifier)'s transfer service has no transfer characteristic")
    }

    // AcquireNotify: a transfer peer starts its message when its stack reports the
    // subscription, after the Write Response that AcquireNotify's socket waits for, so no
    // chunk comes early; the socket costs bluetoothd and this process less per chunk than
    // PropertiesChanged signals, and its backlog tells whether a plain chunk may have been
    // dropped (lossCheck below). A sequenced message whose first frame was lost anyway
    // fails its own checks.
    let notifications = try await peripheral.notifications(for: source, preferAcquire: true)
    onSubscribed()
    options.subscribed?()
    let start = ContinuousClock.now
    let outcome: (bytes: [UInt8], outOfOrder: Int)
    do {
      outcome = try await collect(
        notifications, framing: framing, options: options, peer: peripheral.identifier)
    } catch {
      await notifications.stop()
      throw error
    }
    let duration = ContinuousClock.now - start
    // Plain chunks carry no numbers: a chunk bluetoothd or the kernel dropped leaves no gap to
    // see, so the message is trusted only if neither its socket nor the kernel's ATT queues
    // were seen backed up far enough for a drop. (A sequenced message that lost a frame fails
    // its own checks.)
    let check = await notifications.lossCheck()
    if framing == .plain && check.lossPossible && check != .notObservable {
      await notifications.stop()
      throw BluetoothError.chunksMayBeLost(check.reason)
    }
    // As in the sample: the reply goes out while still subscribed, then unsubscribe.
    do {
      try await writeReply(options.reply, plain: plain, on: peripheral)
    } catch {
      await notifications.stop()
      throw error
    }
    await notifications.stop()
    return Received(
      bytes: outcome.bytes, framing: framing, order: order, method: notifications.method,
      duration: duration, peripheral: peripheral.identifier,
      framesOutOfOrder: outcome.outOfOrder, socketBacklogPeak: check.peakBytes)
  }

  /// Decides whether a plain peer's chunks arrive in order on this link: from the local
  /// bluetoothd's `[GATT] Channels` and the peer's Server Supported Features (0x2B3A).
  func plainOrder(on peripheral: Peripheral) async -> TransferOrder {
    let local = await manager.bluetoothdConfiguration()
    return TransferOrder.plain(
      localChannels: local?.gattChannels,
      localSource: local?.source ?? "its configuration file could not be read",
      peer: await peerEATT(peripheral))
  }

  /// Reads the peer's Server Supported Features. A peer whose Generic Attribute service is
  /// not visible counts as unknown, not as one without EATT.
  private func peerEATT(_ peripheral: Peripheral) async -> TransferOrder.PeerEATT {
    do {
      guard
        let gatt = try await peripheral.services([AssignedNumbers.genericAttributeService])
          .first
      else {
        return .unknown("its Generic Attribute service (0x1801) is not visible")
      }
      guard
        let features = try await peripheral.characteristics(
          [AssignedNumbers.serverSupportedFeatures], for: gatt
        ).first
      else {
        return TransferOrder.PeerEATT(serverSupportedFeatures: nil)
      }
      return TransferOrder.PeerEATT(
        serverSupportedFeatures: try await peripheral.readValue(for: features))
    } catch {
      return .unknown("reading its Server Supported Features failed: \(error.message)")
    }
  }

  /// How long a connected peer's services may still be coming in before the transfer service
  /// counts as absent.
  static let serviceSettleTime: Duration = .seconds(5)

  /// The peer's transfer service. bluetoothd can say the services are resolved from its cache
  /// and export what a discovery still running finds a moment later (seen with `receive
  /// --from` a known address, and after a bluetoothd restart): so an absent service is waited
  /// for, as the object tree reports bluetoothd's exports, until ``serviceSettleTime`` from
  /// the first look or until the peer disconnects, before the peer counts as not offering it.
  func transferService(of peripheral: Peripheral) async throws -> RemoteService? {
    let deadline = ContinuousClock.now + Self.serviceSettleTime
    if let service = try await peripheral.services([BlekitUUID.transferService]).first {
      return service
    }
    let remaining = deadline - .now
    guard remaining > .zero else { return nil }
    return await peripheral.lookingUntilExported(
      { peripheral.resolvedServices([BlekitUUID.transferService]).first },
      isComplete: { $0 != nil }, wait: Peripheral.ExportWait(quiet: nil, limit: remaining))
  }

  /// Writes the reply without response to the plain characteristic (the sample's).
  private func writeReply(
    _ reply: String?, plain: RemoteCharacteristic?, on peripheral: Peripheral
  ) async throws {
    if let reply = reply, let plain {
      let bytes = Array(reply.utf8)
      let limit = await peripheral.maximumWriteValueLength(
        for: .withoutResponse, characteristic: plain)
      guard bytes.count <= limit else {
        throw BluetoothError(
          .notSupported,
          "the reply is \(bytes.count) bytes; one write without response holds at most \(limit)")
      }
      try await peripheral.writeValue(bytes, for: plain, type: .withoutResponse)
    } else if reply != nil {
      throw BluetoothError(
        .attributeNotFound, "the peer has no characteristic to write the reply to")
    }
  }

  /// Reads notifications until the message is complete; a stop before that, no progress for
  /// the idle timeout, or the deadline's passing is ``BluetoothError/Code/transferInterrupted``.
  private func collect(
    _ notifications: NotificationStream, framing: Framing, options: Options,
    peer: PeripheralIdentifier
  ) async throws -> (bytes: [UInt8], outOfOrder: Int) {
    let shared = CollectShared(framing: framing, progress: options.progress)
    let deadlines = TransferDeadlines(deadline: options.deadline, idleTimeout: options.idleTimeout)
    let start = ContinuousClock.now
    return try await withThrowingTaskGroup(of: (bytes: [UInt8], outOfOrder: Int)?.self) {
      group in
      group.addTask {
        do {
          // Values come in batches (all that one read burst brought): the time of the last
          // notification, the lock and the progress report are paid once per batch. On an
          // AcquireNotify socket the reassembly moves to the reader's thread (after the
          // batches already in the stream), and this task wakes only when the message is in,
          // failed its checks, or the stream ended: a slow link brings one value per batch,
          // and a hand-over between threads per value would cost more than the value's work.
          var values = notifications.makeAsyncIterator()
          _ = notifications.divert { shared.takeOnReaderThread(&$0) }
          while true {
            let batch: ArraySlice<[UInt8]>?
            do {
              batch = try await values.nextBatchOrMarker()
            } catch let error as BluetoothError {
              // The stream's end (a disconnection, the bus gone) cuts the transfer; a failed
              // check of the protocol's, thrown by `take`, is not a cut.
              throw shared.state.withLock { $0.interrupted(cause: error) }
            }
            guard let batch else { break }
            if let result = try shared.take(batch) { return result }
          }
        }
        throw shared.state.withLock { $0.interrupted(cause: nil) }
      }
      group.addTask {
        // Sleeps until a limit would pass if no progress came meanwhile (a slow link is not
        // woken up twice a second to find it did not).
        while true {
          let lastProgress = shared.state.withLock { $0.lastProgress }
          if let expiry = deadlines.expiry(start: start, lastProgress: lastProgress, now: .now) {
            throw shared.state.withLock {
              $0.interrupted(cause: BluetoothError(.timeout, "\(peer): \(expiry)"))
            }
          }
          try await Task.sleep(
            until: min(start + deadlines.deadline, lastProgress + deadlines.idleTimeout),
            clock: .continuous)
        }
      }
      if let progress = options.progress {
        // The user's callback, off the reader's thread and lock: the latest count each time.
        group.addTask {
          for await bytes in shared.progressCounts { progress(bytes) }
          return nil
        }
      }
      defer {
        shared.endProgress()
        group.cancelAll()
      }
      while let next = try await group.next() {
        if let result = next { return result }
      }
      throw CancellationError()
    }
  }
}

/// The decoder and the time of the last progress, shared by the consumer's task, the
/// socket reader's thread (once the stream is diverted to it) and the watchdog.
private final class CollectShared: Sendable {
  let state: Mutex<CollectState>
  /// The counts for ``TransferCentral/Options/progress``, the newest kept: read by a task of
  /// the transfer's, so the callback never runs on the reader's thread under its lock.
  let progressCounts: AsyncStream<Int>
  private let progressContinuation: AsyncStream<Int>.Continuation
  /// Whether anyone takes the counts. A flag, not an optional continuation: looking into the
  /// optional cost about 340 instructions per call (it goes through the type's metadata), paid
  /// per value on a slow link (callgrind, `scripts/bench-receive --interval 20`).
  private let reportsProgress: Bool

  init(framing: TransferCentral.Framing, progress: (@Sendable (Int) -> Void)?) {
    state = Mutex(CollectState(framing: framing))
    let (counts, continuation) = AsyncStream.makeStream(
      of: Int.self, bufferingPolicy: .bufferingNewest(1))
    progressCounts = counts
    progressContinuation = continuation
    reportsProgress = progress != nil
  }

  private func report(_ bytes: Int) {
    if reportsProgress { progressContinuation.yield(bytes) }
  }

  /// Ends the counts (the callback's task then ends too), once the transfer is over.
  func endProgress() { progressContinuation.finish() }

  /// A batch read from the stream: values that came before a diversion (or on a stream that
  /// has none), or an empty marker (the diversion, or the reader's thread saying it is done),
  /// upon which values held back meanwhile are taken. Returns the message once it is complete.
  func take(_ batch: ArraySlice<[UInt8]>) throws(BluetoothError) -> (
    bytes: [UInt8], outOfOrder: Int
  )? {
    let (outcome, bytes) = state.withLock { state in
      if batch.isEmpty {
        state.diverted = true
        for held in state.heldBack { state.absorb(held[...]) }
        state.heldBack = []
      } else {
        state.absorb(batch)
      }
      return (state.outcome, state.bytesReceived)
    }
    if let outcome {
      let message = try outcome.get()
      return (message.bytes, message.outOfOrder)
    }
    if !batch.isEmpty { report(bytes) }
    return nil
  }

  /// A burst on the reader's thread, once the stream is diverted: held back until the consumer
  /// has taken what the stream holds, then taken at once, each value's bytes appended straight
  /// from the reader's buffer. True once the message is complete or failed (the consumer must
  /// be woken).
  func takeOnReaderThread(_ burst: inout NotificationSocket.Burst) -> Bool {
    let (done, bytes) = state.withLock { state -> (Bool, Int?) in
      // Values after the outcome are left to the reader, which drops them.
      guard !state.over else { return (false, nil) }
      guard state.diverted else {
        // Progress is counted when the consumer takes these (at once, normally).
        var batch: [[UInt8]] = []
        while let value = burst.next({ Array($0) }) { batch.append(value) }
        if !batch.isEmpty { state.heldBack.append(batch) }
        return (false, nil)
      }
      state.absorb(&burst)
      return (state.over, state.bytesReceived)
    }
    if !done, let bytes { report(bytes) }
    return done
  }
}

/// The receiver's decoder for either framing, and when the message last grew.
private struct CollectState: Sendable {
  let framing: TransferCentral.Framing
  var plain = TransferReassembler()
  var sequenced = SequencedTransferDecoder()
  /// When ``bytesReceived`` last grew (or the collection began).
  var lastProgress = ContinuousClock.now
  /// The message, or why it failed, once either is known.
  var outcome: Result<Collected, BluetoothError>? {
    didSet { over = outcome != nil }
  }
  /// Whether ``outcome`` is set: what each value and burst checks (comparing the optional
  /// result with `nil` copied it, about 55 instructions per value on a slow link; callgrind,
  /// `scripts/bench-receive --interval 20`).
  private(set) var over = false
  /// Whether the consumer has reached the diversion's marker.
  var diverted = false
  /// Batches the reader's thread brought before that.
  var heldBack: [[[UInt8]]] = []

  init(framing: TransferCentral.Framing) {
    self.framing = framing
  }

  /// A message taken in full.
  struct Collected: Sendable {
    var bytes: [UInt8]
    var outOfOrder: Int
  }

  /// Takes a batch of values (and notes the time when they added bytes: values that add none,
  /// empty or repeated, are not progress); sets ``outcome`` once the message is complete or
  /// fails its checks. Values after that are ignored.
  mutating func absorb(_ batch: ArraySlice<[UInt8]>) {
    guard !over else { return }
    let before = bytesReceived
    do throws(BluetoothError) {
      for value in batch {
        if let message = try take(value) {
          outcome = .success(message)
          break
        }
      }
    } catch {
      outcome = .failure(error)
    }
    noteProgress(since: before)
  }

  /// Takes the values of a burst as ``absorb(_:)-(ArraySlice<[UInt8]>)`` takes a batch's; the
  /// reader drops what is left of the burst once ``outcome`` is set.
  mutating func absorb(_ burst: inout NotificationSocket.Burst) {
    guard !over else { return }
    let before = bytesReceived
    // The closure sets the outcome itself: returning a `Result` per value cost more than
    // appending the value (callgrind, bench/receive).
    while !over,
      burst.next({ value -> Void in
        do throws(BluetoothError) {
          if let message = try take(value) { outcome = .success(message) }
        } catch {
          outcome = .failure(error)
        }
      }) != nil
    {}
    noteProgress(since: before)
  }

  /// Notes the time if bytes were added since there were `before`. Called at the end rather
  /// than from a `defer`, which copied the whole state at each call: about 600 instructions per
  /// value on a slow link, where each value comes on its own (callgrind,
  /// `scripts/bench-receive --interval 20`).
  private mutating func noteProgress(since before: Int) {
    if bytesReceived > before { lastProgress = .now }
  }

  private mutating func take(_ value: [UInt8]) throws(BluetoothError) -> Collected? {
    // Array's withUnsafeBytes rethrows untyped: the outcome is carried out of it.
    let taken = value.withUnsafeBytes { bytes -> Result<Collected?, BluetoothError> in
      do throws(BluetoothError) { return .success(try take(bytes)) } catch {
        return .failure(error)
      }
    }
    return try taken.get()
  }

  private mutating func take(_ value: UnsafeRawBufferPointer) throws(BluetoothError)
    -> Collected?
  {
    switch framing {
    case .plain:
      guard let bytes = try plain.receive(value) else { return nil }
      return Collected(bytes: bytes, outOfOrder: 0)
    case .sequenced:
      guard let message = try sequenced.receive(value) else { return nil }
      return Collected(bytes: message.bytes, outOfOrder: sequenced.framesOutOfOrder)
    }
  }

  var bytesReceived: Int {
    framing == .plain ? plain.bytesReceived : sequenced.bytesReceived
  }

  func interrupted(cause: BluetoothError?) -> BluetoothError {
    switch framing {
    case .plain:
      .transferInterrupted(
        bytesReceived: plain.bytesReceived, chunksReceived: plain.chunksReceived, cause: cause)
    case .sequenced:
      .transferInterrupted(
        bytesReceived: sequenced.bytesReceived, chunksReceived: sequenced.framesReceived,
        cause: cause)
    }
  }
}
