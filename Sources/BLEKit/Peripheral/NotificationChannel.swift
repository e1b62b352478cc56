// One characteristic's way to its subscribers: the AcquireNotify sockets (one, or one per
// central where bluetoothd hands out per-device sockets), or paced PropertiesChanged(Value)
// signals, with CoreBluetooth's "queue full / ready again" contract.
import BlueZ
import DBus
import Synchronization

/// The runtime side of one published ``MutableCharacteristic``.
final class NotificationChannel: Sendable {
  /// Values queued for the `PropertiesChanged` path before ``attempt(_:signalReady:)`` reports
  /// a full queue.
  static let pacedCapacity = 8
  /// The gap between two `PropertiesChanged(Value)` signals. Hundreds emitted back to back
  /// to bluetoothd 5.66 through dbus-daemon 1.14 cost the peripheral its bus connection (cause
  /// not established); 2 ms between them kept it. AcquireNotify's socket, with back-pressure,
  /// is the preferred path.
  static let pacingInterval: Duration = .milliseconds(2)

  let characteristic: MutableCharacteristic
  let eventsContinuation: PeripheralEventQueue
  /// What the running bluetoothd does with notify sockets.
  let features: BluetoothdFeatures
  /// Whether the characteristic is exported with `NotifyAcquired`, so that bluetoothd hands
  /// out sockets: notify characteristics that ask for it, and indicating ones only where
  /// bluetoothd reports confirmations on the socket (5.80 and later).
  let usesSocket: Bool

  private struct State {
    var registration: GattApplicationRegistration?
    var path: ObjectPath?
    /// The open notify sockets, by the central bluetoothd named (its object path; "" when
    /// it named none). BlueZ up to 5.68 hands out one; later releases one per central.
    var sockets: [String: NotifySocket] = [:]
    /// Two centrals' sockets were open at once: bluetoothd hands out per-device sockets,
    /// whatever its version said.
    var sawPerDeviceSockets = false
    var propertySubscribed = false
    /// The latest MTU bluetoothd mentioned in any request to this characteristic.
    var knownMTU: Int?
    var paced: [[UInt8]] = []
    var pacerRunning = false
    /// `updateValue` said "full": owe the caller a `.readyToUpdate`.
    var owesReady = false
    /// Bumped whenever room appears or the subscription ends, so a waiter can tell.
    var generation: UInt64 = 0
    var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    var nextWaiter: UInt64 = 0
    /// Indications sent and not yet confirmed, oldest first.
    var confirmations: [(id: UInt64, waiter: CheckedContinuation<Confirmation, Never>)] = []
    /// Indications sent through sockets, oldest first, with the sockets (keys of `sockets`)
    /// whose central has not confirmed yet.
    var socketIndications: [SocketIndication] = []
    var nextIndication: UInt64 = 0
  }
  struct SocketIndication {
    let id: UInt64
    var waiting: Set<String>
    var confirmedByAny = false
    let waiter: CheckedContinuation<Confirmation, Never>
  }
  private let state = Mutex(State())

  init(
    characteristic: MutableCharacteristic,
    events: PeripheralEventQueue,
    features: BluetoothdFeatures = BluetoothdFeatures(version: nil)
  ) {
    self.characteristic = characteristic
    self.eventsContinuation = events
    self.features = features
    self.usesSocket =
      characteristic.usesNotifySocket
      && (!characteristic.properties.contains(.indicate)
        || features.socketConfirmations == .socketByte)
  }

  func attach(registration: GattApplicationRegistration, path: ObjectPath) {
    state.withLock {
      $0.registration = registration
      $0.path = path
    }
  }

  // MARK: - Subscriptions (called from the exported object's handlers)

  func noteMTU(_ mtu: Int?) {
    guard let mtu, mtu >= 23 else { return }
    state.withLock { $0.knownMTU = mtu }
  }

  /// bluetoothd called `AcquireNotify`: a central subscribed (the first one, up to BlueZ
  /// 5.68; each one, with its own socket, from 5.69).
  func acquired(_ acquired: GattAcquiredSocket) {
    let key = acquired.device?.rawValue ?? ""
    let socket = NotifySocket(
      acquired,
      onWritable: { [weak self] in self?.roomAvailable() },
      onClosed: { [weak self] in self?.socketClosed(key: key) },
      onConfirmation: { [weak self] in self?.socketConfirmed(key: key) })
    let previous = state.withLock { state in
      let previous = state.sockets[key]
      state.sockets[key] = socket
      state.knownMTU = acquired.mtu
      if state.sockets.contains(where: { $0.key != key && !$0.value.isClosed }) {
        state.sawPerDeviceSockets = true
      }
      return previous
    }
    previous?.close()
    socket.start()
    eventsContinuation.yield(.subscribed(socket.central, characteristic))
  }

  private func socketClosed(key: String) {
    let (closedOne, registration, path, noneLeft) = state.withLock {
      state -> (NotifySocket?, GattApplicationRegistration?, ObjectPath?, Bool) in
      guard let socket = state.sockets[key], socket.isClosed else {
        return (nil, nil, nil, false)
      }
      state.sockets[key] = nil
      return (socket, state.registration, state.path, state.sockets.isEmpty)
    }
    guard let closedOne else { return }
    if noneLeft, let registration, let path {
      registration.acquiredSocketClosed(characteristic: path, notify: true)
    }
    socketIndicationsLost(key: key)
    wakeWaiters(emitReady: false)
    eventsContinuation.yield(.unsubscribed(closedOne.central, characteristic))
  }

  func startNotify() {
    state.withLock { $0.propertySubscribed = true }
    eventsContinuation.yield(.subscribed(nil, characteristic))
  }

  func stopNotify() {
    let was = state.withLock { state in
      defer {
        state.propertySubscribed = false
        state.paced.removeAll()
      }
      return state.propertySubscribed
    }
    guard was else { return }
    wakeWaiters(emitReady: false)
    finishIndications(.unsubscribed, includingSockets: false)
    eventsContinuation.yield(.unsubscribed(nil, characteristic))
  }

  /// Ends the subscription from our side (the manager closes).
  func close() {
    let sockets = state.withLock { state in
      defer {
        state.sockets.removeAll()
        state.propertySubscribed = false
        state.paced.removeAll()
        state.registration = nil
      }
      return Array(state.sockets.values)
    }
    for socket in sockets { socket.close() }
    wakeWaiters(emitReady: false)
    finishIndications(.closed)
  }

  // MARK: - Sending

  var isSubscribed: Bool {
    state.withLock { state in
      state.propertySubscribed || state.sockets.values.contains { !$0.isClosed }
    }
  }

  /// The centrals bluetoothd named (`AcquireNotify`'s `device` option, one per open socket),
  /// and whether they are all the subscribers: only when bluetoothd hands out one socket per
  /// central and nobody subscribed through `StartNotify`, which names nobody.
  var subscriberList: (centrals: [Central], complete: Bool) {
    state.withLock { state in
      let open = state.sockets.values.filter { !$0.isClosed }
      let centrals = open.compactMap(\.central).sorted { $0.identifier < $1.identifier }
      let perDevice = features.notifySockets != .shared || state.sawPerDeviceSockets
      let complete =
        !state.propertySubscribed && (open.isEmpty || perDevice)
        && centrals.count == open.count
      return (centrals, complete)
    }
  }

  /// Why a value cannot go to chosen centrals only; nil when it can (a socket per central
  /// that reaches that central only: BlueZ 5.76 and later).
  var perCentralRefusal: String? {
    let uuid = characteristic.uuid
    guard usesSocket else {
      if characteristic.usesNotifySocket {
        return "bluetoothd \(features.version.map { "\($0) " } ?? "")reports indication "
          + "confirmations on a notify socket only from BlueZ 5.80, so \(uuid)'s values go "
          + "through PropertiesChanged, which reaches every subscribed central"
      }
      return "\(uuid) notifies through PropertiesChanged (usesNotifySocket is false), which "
        + "reaches every subscribed central"
    }
    switch features.notifySockets {
    case .perDevice:
      return nil
    case .perDeviceToAll:
      return "\(features.source) sends a value written to any central's notify socket to "
        + "every subscribed central (BlueZ 5.76 sends it to that central only)"
    case .shared:
      guard features.version != nil else {
        return "blekit could not read bluetoothd's version (the program owning org.bluez, "
          + "run with --version), so it cannot tell whether a value reaches one central only "
          + "(per-device notify sockets came with BlueZ 5.69, delivery to that central only "
          + "with 5.76)"
      }
      return "\(features.source) hands a GATT server one notify socket for all centrals and "
        + "sends \(uuid)'s values to every subscribed central (per-device sockets came with "
        + "BlueZ 5.69, delivery to that central only with 5.76)"
    }
  }

  /// min(MTU - 3, 512) for the current subscription (MTU 23 when bluetoothd never said); with
  /// several sockets, the smallest.
  var maximumUpdateValueLength: Int {
    state.withLock { state in
      let open = state.sockets.values.filter { !$0.isClosed }
      if let smallest = open.map(\.maximumValueLength).min() { return smallest }
      return min((state.knownMTU ?? 23) - 3, 512)
    }
  }

  /// The sockets a value goes through: those of `targets`, or for all subscribers every
  /// socket where each reaches its own central, else one (bluetoothd passes a value written
  /// to it to every subscribed central).
  private func chosenSockets(_ state: State, targets: Set<Central>?) -> [NotifySocket] {
    let open = state.sockets.sorted { $0.key < $1.key }.map(\.value).filter { !$0.isClosed }
    if let targets { return open.filter { $0.central.map(targets.contains) ?? false } }
    if features.notifySockets == .perDevice { return open }
    return open.first.map { [$0] } ?? []
  }

  enum Attempt: Equatable {
    case sent
    /// Full; room is signalled by a generation past this one.
    case full(generation: UInt64)
    case notSubscribed
  }

  /// Tries to hand `value` to bluetoothd now, for every subscriber or, with `targets`, for
  /// those centrals only (callers check ``perCentralRefusal`` first). With `signalReady`, a
  /// full queue later produces one ``PeripheralManagerEvent/readyToUpdate``.
  func attempt(_ value: [UInt8], signalReady: Bool, to targets: Set<Central>? = nil)
    throws(BluetoothError) -> Attempt
  {
    let (sockets, anySocket, viaProperties, generation, knownMTU) = state.withLock { state in
      (
        chosenSockets(state, targets: targets), !state.sockets.isEmpty,
        state.propertySubscribed, state.generation, state.knownMTU
      )
    }
    let maxLength =
      sockets.map(\.maximumValueLength).min() ?? min((knownMTU ?? 23) - 3, 512)
    guard value.count <= maxLength else {
      throw .valueTooLong(length: value.count, maximum: maxLength)
    }
    if targets != nil && (sockets.isEmpty || value.isEmpty) { return .notSubscribed }
    // bluetoothd takes a zero-length datagram for end of file; an empty value goes as a signal.
    if !sockets.isEmpty, !value.isEmpty {
      if sockets.count == 1 || sockets.contains(where: \.isHolding) {
        // One socket: its own "full". Several: wait until none holds a value, then write to
        // each, a full one keeping the value for later, so that no central gets it twice.
        let result: NotifySocket.SendResult =
          sockets.count == 1 && !sockets[0].isHolding ? sockets[0].send(value) : .full
        switch result {
        case .sent:
          return .sent
        case .closed:
          return .notSubscribed
        case .full:
          let roomAlready = state.withLock { state in
            if signalReady { state.owesReady = true }
            return state.generation != generation
          }
          if roomAlready { roomAvailable() }
          return .full(generation: generation)
        }
      }
      let results = sockets.map { $0.sendOrHold(value) }
      return results.contains(.sent) ? .sent : .notSubscribed
    }
    if anySocket && !value.isEmpty { return .notSubscribed }
    if !anySocket && !viaProperties { return .notSubscribed }
    // The PropertiesChanged path (or an empty value on either path).
    let startPacer = state.withLock { state -> Bool? in
      if state.paced.count >= Self.pacedCapacity {
        if signalReady { state.owesReady = true }
        return nil
      }
      state.paced.append(value)
      defer { state.pacerRunning = true }
      return !state.pacerRunning
    }
    guard let startPacer else { return .full(generation: generation) }
    if startPacer { Task { await self.pace() } }
    return .sent
  }

  /// Waits until room appears or the subscription ends after `generation`.
  func waitForRoom(after generation: UInt64) async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumeNow = state.withLock { state -> Bool in
          if state.generation != generation || Task.isCancelled { return true }
          state.waiters[state.nextWaiter] = continuation
          state.nextWaiter += 1
          return false
        }
        if resumeNow { continuation.resume() }
      }
    } onCancel: {
      let waiters = state.withLock { state in
        defer { state.waiters.removeAll() }
        return state.waiters
      }
      for waiter in waiters.values { waiter.resume() }
    }
  }

  private func roomAvailable() { wakeWaiters(emitReady: true) }

  private func wakeWaiters(emitReady: Bool) {
    let (owed, waiters) = state.withLock { state in
      state.generation += 1
      let owed = state.owesReady
      state.owesReady = false
      defer { state.waiters.removeAll() }
      return (owed, state.waiters)
    }
    for waiter in waiters.values { waiter.resume() }
    if owed && emitReady { eventsContinuation.yield(.readyToUpdate) }
  }

  /// Drains the PropertiesChanged queue, one signal per pacing interval.
  private func pace() async {
    while true {
      let next = state.withLock {
        state -> ([UInt8], GattApplicationRegistration, ObjectPath)? in
        guard !state.paced.isEmpty, let registration = state.registration, let path = state.path
        else {
          state.pacerRunning = false
          return nil
        }
        return (state.paced.removeFirst(), registration, path)
      }
      guard let (value, registration, path) = next else { return }
      try? registration.notify(value, characteristic: path)
      roomAvailable()
      try? await Task.sleep(for: Self.pacingInterval)
    }
  }
}

// MARK: - Indications

extension NotificationChannel {
  /// How an indication ended.
  enum Confirmation: Sendable, Equatable {
    case confirmed
    case timedOut
    case unsubscribed
    case closed
    case cancelled
    case failed(String)
  }

  /// bluetoothd called `Confirm`: the oldest pending indication was confirmed.
  func confirmed() {
    let waiter = state.withLock { state in
      state.confirmations.isEmpty ? nil : state.confirmations.removeFirst().waiter
    }
    waiter?.resume(returning: .confirmed)
  }

  /// Ends the pending indication `id`, if it still is.
  private func finishIndication(_ id: UInt64, _ outcome: Confirmation) {
    let waiter = state.withLock { state in
      state.confirmations.firstIndex { $0.id == id }.map { state.confirmations.remove(at: $0) }
    }
    waiter?.waiter.resume(returning: outcome)
  }

  /// Ends every pending indication (the subscription or the manager ended); those sent
  /// through sockets only with `includingSockets` (their centrals leave one by one).
  func finishIndications(_ outcome: Confirmation, includingSockets: Bool = true) {
    let (waiters, socketWaiters) = state.withLock { state in
      defer {
        state.confirmations.removeAll()
        if includingSockets { state.socketIndications.removeAll() }
      }
      return (state.confirmations, includingSockets ? state.socketIndications : [])
    }
    for entry in waiters { entry.waiter.resume(returning: outcome) }
    for entry in socketWaiters { entry.waiter.resume(returning: outcome) }
  }

  /// bluetoothd wrote 0x01 to the socket `key`: its central confirmed the oldest indication
  /// it had not confirmed yet (BlueZ 5.80 and later).
  private func socketConfirmed(key: String) {
    let done = state.withLock { state -> CheckedContinuation<Confirmation, Never>? in
      guard let index = state.socketIndications.firstIndex(where: { $0.waiting.contains(key) })
      else { return nil }
      state.socketIndications[index].waiting.remove(key)
      state.socketIndications[index].confirmedByAny = true
      guard state.socketIndications[index].waiting.isEmpty else { return nil }
      return state.socketIndications.remove(at: index).waiter
    }
    done?.resume(returning: .confirmed)
  }

  /// The socket `key` closed: its central will not confirm; an indication that waited only
  /// for it ends (confirmed when another central confirmed it, else unsubscribed).
  private func socketIndicationsLost(key: String) {
    let ended = state.withLock { state -> [(CheckedContinuation<Confirmation, Never>, Bool)] in
      var ended: [(CheckedContinuation<Confirmation, Never>, Bool)] = []
      state.socketIndications.removeAll { entry in
        guard entry.waiting.contains(key) else { return false }
        guard entry.waiting.count == 1 else { return false }
        ended.append((entry.waiter, entry.confirmedByAny))
        return true
      }
      for index in state.socketIndications.indices {
        state.socketIndications[index].waiting.remove(key)
      }
      return ended
    }
    for (waiter, confirmed) in ended {
      waiter.resume(returning: confirmed ? .confirmed : .unsubscribed)
    }
  }

  /// Ends the socket indication `id`, if it still is.
  private func finishSocketIndication(_ id: UInt64, _ outcome: Confirmation) {
    let entry = state.withLock { state in
      state.socketIndications.firstIndex { $0.id == id }.map {
        state.socketIndications.remove(at: $0)
      }
    }
    entry?.waiter.resume(returning: outcome)
  }

  /// Sends `value` as an indication through every open socket (one per central, each
  /// reaching its own central: BlueZ 5.80 and later) and waits until each of those centrals
  /// confirmed it (bluetoothd writes 0x01 to its socket), at most `timeout`. `nil` when no
  /// socket is open.
  private func indicateThroughSockets(_ value: [UInt8], timeout: Duration) async
    -> Confirmation?
  {
    while true {
      let (sockets, generation) = state.withLock { state in
        (chosenSockets(state, targets: nil), state.generation)
      }
      guard !sockets.isEmpty else { return nil }
      if sockets.contains(where: \.isHolding) {
        if Task.isCancelled { return .cancelled }
        await waitForRoom(after: generation)
        continue
      }
      let id = state.withLock { state in
        state.nextIndication += 1
        return state.nextIndication
      }
      let timer = Task {
        try? await Task.sleep(for: timeout)
        if !Task.isCancelled { finishSocketIndication(id, .timedOut) }
      }
      defer { timer.cancel() }
      return await withTaskCancellationHandler {
        await withCheckedContinuation { (waiter: CheckedContinuation<Confirmation, Never>) in
          // Registered before the value goes out: a confirmation can come back at once.
          let keys = state.withLock { state -> Set<String> in
            Set(state.sockets.filter { entry in sockets.contains { $0 === entry.value } }.keys)
          }
          let early = state.withLock { state -> Confirmation? in
            if Task.isCancelled { return .cancelled }
            state.socketIndications.append(SocketIndication(id: id, waiting: keys, waiter: waiter))
            return nil
          }
          if let early { return waiter.resume(returning: early) }
          var reached = false
          for socket in sockets where socket.sendOrHold(value) == .sent { reached = true }
          if !reached { finishSocketIndication(id, .unsubscribed) }
        }
      } onCancel: {
        finishSocketIndication(id, .cancelled)
      }
    }
  }

  /// Sends `value` as an indication (`PropertiesChanged(Value)`; bluetoothd indicates every
  /// subscribed central) and waits for the confirmation bluetoothd reports with `Confirm`, at
  /// most `timeout`. Confirmations are matched to indications in order.
  func indicate(_ value: [UInt8], timeout: Duration) async -> Confirmation {
    if usesSocket, let outcome = await indicateThroughSockets(value, timeout: timeout) {
      return outcome
    }
    let target = state.withLock { state -> (GattApplicationRegistration, ObjectPath, UInt64)? in
      guard state.propertySubscribed, let registration = state.registration,
        let path = state.path
      else { return nil }
      state.nextIndication += 1
      return (registration, path, state.nextIndication)
    }
    guard let (registration, path, id) = target else { return .unsubscribed }
    let timer = Task {
      try? await Task.sleep(for: timeout)
      if !Task.isCancelled { finishIndication(id, .timedOut) }
    }
    defer { timer.cancel() }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (waiter: CheckedContinuation<Confirmation, Never>) in
        // Registered before the value goes out: a confirmation can come back at once.
        let early = state.withLock { state -> Confirmation? in
          if Task.isCancelled { return .cancelled }
          guard state.propertySubscribed else { return .unsubscribed }
          state.confirmations.append((id, waiter))
          return nil
        }
        if let early { return waiter.resume(returning: early) }
        do throws(BlueZError) {
          try registration.notify(value, characteristic: path)
        } catch {
          finishIndication(id, .failed(error.message))
        }
      }
    } onCancel: {
      finishIndication(id, .cancelled)
    }
  }
}
