// Notifications: AcquireNotify's socket first, StartNotify + PropertiesChanged(Value) second.
import BlueZ
import Bluetooth
import DBus
import Synchronization

/// How a ``NotificationStream`` receives values.
public enum NotificationMethod: Sendable, Hashable {
  /// Through AcquireNotify's socket: one value per read, with the MTU bluetoothd gave.
  case acquiredSocket(mtu: Int)
  /// Through StartNotify and PropertiesChanged(Value) signals.
  case startNotify
}

/// The notifications (or indications) of one characteristic, in arrival order
/// (CoreBluetooth's `setNotifyValue(true, for:)` and `didUpdateValueFor`).
///
/// Nothing this stream has received is dropped: values are buffered until read. Values can be
/// lost before they reach it, without a sign, when the peer sends faster than the host takes
/// them: the kernel drops ATT notifications that do not fit bluetoothd's socket (ATT has no
/// flow control), and bluetoothd drops a value it cannot write to a full AcquireNotify socket
/// (it logs `sendmsg: Resource temporarily unavailable`). Values that must all arrive need
/// numbers of their own (as blekit's sequenced transfer frames have). Ending the iteration,
/// cancelling it, or ``stop()`` unsubscribes. If the peripheral disconnects, values already received are still
/// delivered, then the sequence throws ``BluetoothError/Code/disconnected``; it never hangs.
public struct NotificationStream: AsyncSequence, Sendable {
  public typealias Element = [UInt8]
  public typealias Failure = any Error
  let stream: AsyncThrowingStream<[UInt8], any Error>
  let subscription: NotificationSubscription
  /// How values arrive.
  public let method: NotificationMethod

  public func makeAsyncIterator() -> AsyncThrowingStream<[UInt8], any Error>.Iterator {
    stream.makeAsyncIterator()
  }

  /// Unsubscribes and waits until bluetoothd has been told (StopNotify answered, or the
  /// socket closed). Safe to call more than once.
  public func stop() async {
    await subscription.stop()
  }
}

/// The unsubscribe action of one stream, run at most once.
final class NotificationSubscription: Sendable {
  private let action: Mutex<(@Sendable () async -> Void)?>

  init(_ action: @escaping @Sendable () async -> Void) {
    self.action = Mutex(action)
  }

  func stop() async {
    let action = self.action.withLock { action in
      defer { action = nil }
      return action
    }
    await action?()
  }
}

extension Peripheral {
  /// Subscribes to a characteristic's notifications or indications.
  ///
  /// Uses `AcquireNotify` when the characteristic notifies (one notification per read of the
  /// SOCK_SEQPACKET socket, read by a DispatchSource), else, or when bluetoothd refuses it,
  /// `StartNotify` with the values taken from PropertiesChanged(Value).
  /// The corresponding D-Bus members are `org.bluez.GattCharacteristic1.AcquireNotify`,
  /// `StartNotify` and `StopNotify`.
  public func notifications(
    for characteristic: RemoteCharacteristic, preferAcquire: Bool = true
  ) async throws(BluetoothError) -> NotificationStream {
    guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else {
      throw BluetoothError(
        .notSupported, "characteristic \(characteristic.uuid) neither notifies nor indicates")
    }
    let proxy = try await proxy(for: characteristic)
    let (_, _, events) = objects.subscribe()
    // Unbounded: a lost notification would corrupt what the consumer assembles (a transfer
    // caps its message at 16 MiB and fails beyond it); the consumer must keep up.
    let (stream, continuation) = AsyncThrowingStream.makeStream(
      of: [UInt8].self, throwing: (any Error).self, bufferingPolicy: .unbounded)
    let devicePath = identifier.path
    let name = identifier.description

    if preferAcquire, characteristic.properties.contains(.notify) {
      var acquired: AcquiredSocket?
      do throws(BlueZError) {
        acquired = try await proxy.acquireNotify()
      } catch  where [.notSupported, .notPermitted, .failed, .inProgress].contains(error.code) {
        acquired = nil
      } catch {
        throw BluetoothError(error, while: "subscribing to \(characteristic.uuid)")
      }
      if let acquired, let fd = acquired.fileDescriptor.take() {
        let tree = objects
        let reader = NotificationSocket(
          fd: fd, mtu: Int(acquired.mtu),
          onValue: { continuation.yield($0) },
          onEnd: { error in
            guard let error = error as? BluetoothError else {
              if let error { continuation.finish(throwing: error) } else { continuation.finish() }
              return
            }
            // bluetoothd closes the socket as it exits, which it does when the bus goes away.
            Task { continuation.finish(throwing: await Self.explain(error, tree: tree)) }
          })
        let watch = Task {
          if let error = await Self.waitForLinkLoss(
            events, device: devicePath, name: name, tree: tree)
          {
            reader.finish(after: error)
          }
        }
        let subscription = NotificationSubscription {
          watch.cancel()
          reader.cancel()
        }
        continuation.onTermination = { _ in Task { await subscription.stop() } }
        return NotificationStream(
          stream: stream, subscription: subscription,
          method: .acquiredSocket(mtu: Int(acquired.mtu)))
      }
    }

    do throws(BlueZError) {
      try await proxy.startNotify()
    } catch {
      throw BluetoothError(error, while: "subscribing to \(characteristic.uuid)")
    }
    let path = characteristic.path
    let tree = objects
    let watch = Task {
      for await event in events {
        switch event {
        case .propertiesChanged(let changedPath, let interface, let changed, _, _)
        where changedPath == path && interface == GattCharacteristic1.interface:
          if let value = changed[GattCharacteristic1.value.name]?.bytesValue {
            continuation.yield(value)
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
    return NotificationStream(stream: stream, subscription: subscription, method: .startNotify)
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
  /// bluetoothd left, reports the device removed and then bluetoothd stopped (seen in the lab
  /// with dbus-daemon stopped mid-transfer). Then the bus is what ended the link.
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
