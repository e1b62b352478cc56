// One characteristic's way to its subscribers: the AcquireNotify socket, or paced
// PropertiesChanged(Value) signals, with CoreBluetooth's "queue full / ready again" contract.
import BlueZ
import DBus
import Synchronization

/// The runtime side of one published ``MutableCharacteristic``.
final class NotificationChannel: Sendable {
  /// Values queued for the `PropertiesChanged` path before ``attempt(_:signalReady:)`` reports
  /// a full queue.
  static let pacedCapacity = 8
  /// The gap between two `PropertiesChanged(Value)` signals. Emitting them back to back got a
  /// peripheral's bus connection dropped in the lab; 2 ms kept it.
  static let pacingInterval: Duration = .milliseconds(2)

  let characteristic: MutableCharacteristic
  let eventsContinuation: AsyncStream<PeripheralManagerEvent>.Continuation

  private struct State {
    var registration: GattApplicationRegistration?
    var path: ObjectPath?
    var socket: NotifySocket?
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
    var nextIndication: UInt64 = 0
  }
  private let state = Mutex(State())

  init(
    characteristic: MutableCharacteristic,
    events: AsyncStream<PeripheralManagerEvent>.Continuation
  ) {
    self.characteristic = characteristic
    self.eventsContinuation = events
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

  /// bluetoothd called `AcquireNotify`: the first central subscribed.
  func acquired(_ acquired: GattAcquiredSocket) {
    let socket = NotifySocket(
      acquired,
      onWritable: { [weak self] in self?.roomAvailable() },
      onClosed: { [weak self] in self?.socketClosed() })
    let previous = state.withLock { state in
      defer {
        state.socket = socket
        state.knownMTU = acquired.mtu
      }
      return state.socket
    }
    previous?.close()
    socket.start()
    eventsContinuation.yield(.subscribed(socket.central, characteristic))
  }

  private func socketClosed() {
    let (closedOne, registration, path) = state.withLock {
      state -> (NotifySocket?, GattApplicationRegistration?, ObjectPath?) in
      guard let socket = state.socket, socket.isClosed else { return (nil, nil, nil) }
      state.socket = nil
      return (socket, state.registration, state.path)
    }
    guard let closedOne else { return }
    if let registration, let path {
      registration.acquiredSocketClosed(characteristic: path, notify: true)
    }
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
    finishIndications(.unsubscribed)
    eventsContinuation.yield(.unsubscribed(nil, characteristic))
  }

  /// Ends the subscription from our side (the manager closes).
  func close() {
    let socket = state.withLock { state in
      defer {
        state.socket = nil
        state.propertySubscribed = false
        state.paced.removeAll()
        state.registration = nil
      }
      return state.socket
    }
    socket?.close()
    wakeWaiters(emitReady: false)
    finishIndications(.closed)
  }

  // MARK: - Sending

  var isSubscribed: Bool {
    state.withLock { ($0.socket.map { !$0.isClosed } ?? false) || $0.propertySubscribed }
  }

  /// The central bluetoothd named when the subscription began (`AcquireNotify`'s `device`
  /// option); nil on the `StartNotify` path, which names nobody.
  var firstSubscriber: Central? {
    state.withLock { state in
      guard let socket = state.socket, !socket.isClosed else { return nil }
      return socket.central
    }
  }

  /// min(MTU - 3, 512) for the current subscription (MTU 23 when bluetoothd never said).
  var maximumUpdateValueLength: Int {
    state.withLock { state in
      if let socket = state.socket { return socket.maximumValueLength }
      return min((state.knownMTU ?? 23) - 3, 512)
    }
  }

  enum Attempt: Equatable {
    case sent
    /// Full; room is signalled by a generation past this one.
    case full(generation: UInt64)
    case notSubscribed
  }

  /// Tries to hand `value` to bluetoothd now. With `signalReady`, a full queue later produces
  /// one ``PeripheralManagerEvent/readyToUpdate``.
  func attempt(_ value: [UInt8], signalReady: Bool) throws(BluetoothError) -> Attempt {
    let (socket, viaProperties, generation, maxLength) = state.withLock { state in
      (
        state.socket, state.propertySubscribed, state.generation,
        state.socket?.maximumValueLength ?? min((state.knownMTU ?? 23) - 3, 512)
      )
    }
    guard value.count <= maxLength else {
      throw .valueTooLong(length: value.count, maximum: maxLength)
    }
    // bluetoothd takes a zero-length datagram for end of file; an empty value goes as a signal.
    if let socket, !socket.isClosed, !value.isEmpty {
      switch socket.send(value) {
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
    if socket != nil && !value.isEmpty { return .notSubscribed }
    if socket == nil && !viaProperties { return .notSubscribed }
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

  /// Ends every pending indication (the subscription or the manager ended).
  func finishIndications(_ outcome: Confirmation) {
    let waiters = state.withLock { state in
      defer { state.confirmations.removeAll() }
      return state.confirmations
    }
    for entry in waiters { entry.waiter.resume(returning: outcome) }
  }

  /// Sends `value` as an indication (`PropertiesChanged(Value)`; bluetoothd indicates every
  /// subscribed central) and waits for the confirmation bluetoothd reports with `Confirm`, at
  /// most `timeout`. Confirmations are matched to indications in order.
  func indicate(_ value: [UInt8], timeout: Duration) async -> Confirmation {
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
