// Notifications: StartNotify + PropertiesChanged(Value) by default, AcquireNotify's socket
// when the caller asks for it.
import BlueZ
import Bluetooth
import DBus

extension Peripheral {
  /// Subscribes to a characteristic's notifications or indications.
  ///
  /// By default this uses `StartNotify` and takes the values from PropertiesChanged(Value)
  /// signals. That path delivers every value bluetoothd receives once the subscription is
  /// requested, including one the peripheral sends before it has answered the write that
  /// enables notifications (several devices do), and including empty values. A value read
  /// from the characteristic while subscribed (by any client) updates the same property, so
  /// it arrives too.
  ///
  /// With `preferAcquire`, a characteristic that notifies is read through `AcquireNotify`'s
  /// socket instead: one value per datagram, read on the reactor's thread, with no D-Bus
  /// signal per value for bluetoothd and the bus to carry, and with
  /// ``NotificationStream/lossCheck()`` able to tell whether bluetoothd may have dropped
  /// values because the reader fell behind.
  /// Its cost: bluetoothd creates the socket only once the peripheral has answered the
  /// subscribing write, and drops every value that arrives before (`notify_io_cb` in BlueZ's
  /// `src/gatt-client.c`). Ask for it only when the peripheral sends nothing before it has
  /// confirmed the subscription, as a peer of blekit's transfer protocol does: it starts a
  /// message when its stack reports the subscription. A characteristic that only indicates,
  /// or one bluetoothd will not hand over (another client subscribed, say), goes through
  /// `StartNotify` all the same. ``NotificationStream/method`` says which path was taken.
  ///
  /// Either way, values arrive in order and an empty value arrives as an empty array, and
  /// the stream holds at most ``NotificationStream/bufferLimit`` unread values: a consumer
  /// that falls further behind loses the values that come meanwhile, counted in
  /// ``NotificationStream/droppedValues``.
  /// The corresponding D-Bus members are `org.bluez.GattCharacteristic1.StartNotify`,
  /// `StopNotify` and `AcquireNotify`.
  public func notifications(
    for characteristic: RemoteCharacteristic, preferAcquire: Bool = false
  ) async throws(BluetoothError) -> NotificationStream {
    try await notifications(
      for: characteristic, preferAcquire: preferAcquire,
      bufferLimit: NotificationStream.bufferLimit)
  }

  /// ``notifications(for:preferAcquire:)`` with a bound of `bufferLimit` unread values (tests
  /// use a small one).
  func notifications(
    for characteristic: RemoteCharacteristic, preferAcquire: Bool, bufferLimit: Int
  ) async throws(BluetoothError) -> NotificationStream {
    guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else {
      throw BluetoothError(
        .notSupported, "characteristic \(characteristic.uuid) neither notifies nor indicates")
    }
    let proxy = try await proxy(for: characteristic)
    let (_, _, events) = objects.subscribe()
    let devicePath = identifier.path
    let name = identifier.description

    let subscribing = "subscribing to \(characteristic.uuid)"
    if preferAcquire, characteristic.properties.contains(.notify) {
      let acquired: AcquiredSocket?
      let answer = try await subscriptionAnswer(subscribing, on: proxy) {
        () throws(BlueZError) in try await proxy.acquireNotify()
      }
      switch answer {
      case .success(let socket):
        acquired = socket
      case .failure(let error)
      where [.notSupported, .notPermitted, .failed, .inProgress].contains(error.code):
        acquired = nil
      case .failure(let error):
        throw BluetoothError(error, while: subscribing)
      }
      if let acquired, let fd = acquired.fileDescriptor.take() {
        let tree = objects
        return NotificationStream.reading(
          socket: fd, mtu: Int(acquired.mtu), bufferLimit: bufferLimit,
          // bluetoothd closes the socket as it exits, which it does when the bus goes away.
          explain: { error in await Self.explain(error, tree: tree) },
          watch: { reader in
            if let error = await Self.waitForLinkLoss(
              events, device: devicePath, name: name, tree: tree)
            {
              reader.finish(after: error)
            }
          })
      }
    }

    let started = try await subscriptionAnswer(subscribing, on: proxy) {
      () throws(BlueZError) in try await proxy.startNotify()
    }
    if case .failure(let error) = started { throw BluetoothError(error, while: subscribing) }
    let (batches, continuation) = NotificationStream.makeBatches()
    let buffer = NotificationBuffer(limit: bufferLimit)
    let path = characteristic.path
    let tree = objects
    let watch = Task {
      for await event in events {
        switch event {
        case .propertiesChanged(let changedPath, let interface, let changed, _, _)
        where changedPath == path && interface == GattCharacteristic1.interface:
          if let value = changed[GattCharacteristic1.value.name]?.bytesValue {
            // A value that does not fit the stream's bound is dropped and counted.
            if buffer.admit(1) == 1 { continuation.yield([value]) }
          }
        default:
          if let error = Self.linkLoss(in: event, device: devicePath, name: name) {
            continuation.finish(throwing: await Self.explain(error, tree: tree))
            return
          }
        }
      }
    }
    let subscription = NotificationSubscription {
      watch.cancel()
      try? await proxy.stopNotify()
    }
    continuation.onTermination = { _ in Task { await subscription.stop() } }
    return NotificationStream(
      batches: batches, buffer: buffer, subscription: subscription, method: .startNotify,
      reader: nil)
  }

  /// Runs a GATT call and returns its answer, unless the link to this peripheral goes first:
  /// then throws the loss (``BluetoothError/Code/disconnected``, or bluetoothd or the bus
  /// gone), prefixed with `doing`. bluetoothd 5.66 never answers an AcquireNotify that is
  /// pending when the link drops (e.g. after ATT's 30 s MTU exchange timeout on a lost
  /// bearer), so waiting for the call alone would wait out ``BlueZ/gattCallTimeout``.
  func untilLinkLoss<Answer: Sendable>(
    _ doing: String, _ call: @escaping @Sendable () async throws(BlueZError) -> Answer
  ) async throws(BluetoothError) -> Result<Answer, BlueZError> {
    let (_, _, events) = objects.subscribe()
    let device = identifier.path
    let name = identifier.description
    let tree = objects
    let outcome = await withTaskGroup(of: LinkRace<Answer>.self) { group in
      group.addTask {
        do throws(BlueZError) {
          return .answered(.success(try await call()))
        } catch {
          return .answered(.failure(error))
        }
      }
      group.addTask {
        .lost(await Self.waitForLinkLoss(events, device: device, name: name, tree: tree))
      }
      defer { group.cancelAll() }
      while let next = await group.next() {
        // A watch that ended without a loss (its events finished) leaves the call to answer.
        if case .lost(nil) = next { continue }
        return next
      }
      return .lost(nil)
    }
    switch outcome {
    case .answered(let answer):
      return answer
    case .lost(let loss):
      let loss = loss ?? BluetoothError(.cancelled, "cancelled")
      throw BluetoothError(loss.code, "\(doing): \(loss.message)", bluez: loss.bluez)
    }
  }

  /// A subscription call (AcquireNotify or StartNotify) through ``untilLinkLoss(_:_:)``; one
  /// given up on without an answer (the link lost, or the call timed out) is withdrawn.
  ///
  /// bluetoothd 5.66 keeps the subscription request of an unanswered AcquireNotify for its
  /// sender, past the link's loss, until that sender leaves the bus: a later AcquireNotify or
  /// StartNotify from the same client is refused with "Notify acquired" (on a second
  /// connection to the same peer). StopNotify removes the sender's request. It is sent
  /// and not waited for: bluetoothd handles one client's calls in order, so it comes before
  /// any later subscription.
  func subscriptionAnswer<Answer: Sendable>(
    _ doing: String, on proxy: GattCharacteristic1,
    _ call: @escaping @Sendable () async throws(BlueZError) -> Answer
  ) async throws(BluetoothError) -> Result<Answer, BlueZError> {
    func withdraw() { Task { try? await proxy.stopNotify() } }
    do throws(BluetoothError) {
      let answer = try await untilLinkLoss(doing, call)
      if case .failure(let error) = answer, error.code == .timeout { withdraw() }
      return answer
    } catch {
      withdraw()
      throw error
    }
  }

  /// Waits for the link to the device to go (disconnected, removed, bluetoothd gone, the bus
  /// gone) and returns the error to end with; `nil` when the wait was cancelled.
  static func waitForLinkLoss(
    _ events: AsyncStream<BlueZObjectEvent>, device: ObjectPath, name: String,
    tree: BlueZObjectTree
  ) async -> BluetoothError? {
    for await event in events {
      if let error = linkLoss(in: event, device: device, name: name) {
        return await explain(error, tree: tree)
      }
    }
    return nil
  }

  /// The end of a link can be the first sign of the system bus going away (see
  /// `BlueZObjectTree.busLoss()`): the bus drops bluetoothd first, and the tree, told that
  /// bluetoothd left, reports the device removed and then bluetoothd stopped (dbus-daemon
  /// stopping mid-transfer). Then the bus is what ended the link.
  static func explain(_ error: BluetoothError, tree: BlueZObjectTree) async -> BluetoothError {
    guard error.code != .busLost else { return error }
    return await tree.busLoss() ?? error
  }

  static func linkLoss(in event: BlueZObjectEvent, device: ObjectPath, name: String)
    -> BluetoothError?
  {
    switch event {
    case .propertiesChanged(let path, let interface, let changed, _, _)
    where path == device && interface == Device1.interface:
      // Only a reported transition counts, never the cached state.
      if changed[Device1.connected.name]?.boolValue == false {
        return BluetoothError(.disconnected, "\(name) disconnected")
      }
    case .interfacesRemoved(let path, let names)
    where path == device && names.contains(Device1.interface):
      return BluetoothError(.disconnected, "\(name) was removed by bluetoothd")
    case .serviceStopped:
      return BluetoothError(.serviceUnavailable, "bluetoothd stopped")
    case .connectionLost(let message):
      return BluetoothError(.busLost, message)
    default:
      break
    }
    return nil
  }
}

/// Which came first in ``Peripheral/untilLinkLoss(_:_:)``: the call's answer, or the link's
/// loss (`nil` when the watch ended without one).
private enum LinkRace<Answer: Sendable>: Sendable {
  case answered(Result<Answer, BlueZError>)
  case lost(BluetoothError?)
}
