// Connecting: Device1.Connect with a deadline, bounded retries with backoff, and waiting for
// ServicesResolved; disconnecting.
import BlueZ
import Bluetooth
import DBus

/// How ``CentralManager/connect(to:timeout:retry:)`` retries transient failures.
public struct ConnectRetryPolicy: Sendable, Hashable {
  /// The most connection attempts in all (the first included).
  public var maximumAttempts: Int
  /// The wait before the second attempt; it doubles for each later one.
  public var initialBackoff: Duration
  /// The longest wait between attempts.
  public var maximumBackoff: Duration

  public init(
    maximumAttempts: Int = 4, initialBackoff: Duration = .milliseconds(250),
    maximumBackoff: Duration = .seconds(2)
  ) {
    self.maximumAttempts = max(1, maximumAttempts)
    self.initialBackoff = initialBackoff
    self.maximumBackoff = maximumBackoff
  }

  /// The default: 4 attempts, 250 ms doubling up to 2 s.
  public static let standard = ConnectRetryPolicy()

  /// The wait after failed attempt number `attempt` (1-based).
  public func backoff(after attempt: Int) -> Duration {
    var wait = initialBackoff
    for _ in 1..<max(1, attempt) {
      wait = wait * 2
      if wait >= maximumBackoff { return maximumBackoff }
    }
    return min(wait, maximumBackoff)
  }

  /// Whether a failed attempt is worth another: bluetoothd busy (`InProgress`), the link
  /// aborted while being set up (`le-connection-abort-by-local`, a known BlueZ/controller
  /// race), a failed connection attempt, or a link that dropped before services resolved.
  public static func isTransient(_ error: BluetoothError) -> Bool {
    if error.code == .disconnected { return true }
    guard let bluez = error.bluez else { return false }
    switch bluez.code {
    case .inProgress, .connectionAttemptFailed, .notReady:
      return true
    default:
      // bluetoothd says which failure in the text of org.bluez.Error.Failed only.
      return bluez.isTransientConnectFailure
    }
  }
}

extension CentralManager {
  /// Connects to a peripheral and waits until bluetoothd has resolved its services
  /// (CoreBluetooth's `connect(_:options:)` and `didConnect`).
  ///
  /// Transient failures are retried per `retry` with backoff while time remains. When the
  /// deadline passes, the pending attempt is cancelled (`Device1.Disconnect`).
  /// The corresponding D-Bus member is `org.bluez.Device1.Connect`.
  public func connect(
    to peripheral: PeripheralIdentifier, timeout: Duration = .seconds(30),
    retry: ConnectRetryPolicy = .standard
  ) async throws(BluetoothError) -> Peripheral {
    try requirePoweredOn()
    let deadline = ContinuousClock.now + timeout
    var attempt = 0
    while true {
      attempt += 1
      do throws(BluetoothError) {
        try await connectOnce(peripheral, deadline: deadline)
        return Peripheral(identifier: peripheral, manager: self)
      } catch {
        if Task.isCancelled {
          // bluetoothd goes on connecting when our Connect call is dropped: undo it, on its
          // own (a call from this cancelled task would not be sent).
          if let device = try? objects.proxy(Device1.self, at: peripheral.path) {
            await runCleanup { try? await device.disconnect() }
          }
          throw BluetoothError(.cancelled, "connecting to \(peripheral) was cancelled")
        }
        let remaining = deadline - .now
        if error.code == .timeout || remaining <= .zero {
          if let device = try? objects.proxy(Device1.self, at: peripheral.path) {
            try? await device.disconnect()
          }
          throw BluetoothError(
            .timeout,
            "connecting to \(peripheral) timed out after \(roughSeconds(timeout)) (\(attempt) attempt"
              + (attempt == 1 ? ")" : "s)") + (error.code == .timeout ? "" : ": \(error)"),
            bluez: error.bluez)
        }
        guard ConnectRetryPolicy.isTransient(error), attempt < retry.maximumAttempts else {
          if ConnectRetryPolicy.isTransient(error) {
            throw BluetoothError(
              .connectionFailed,
              "connecting to \(peripheral) failed after \(attempt) attempts: \(error)",
              bluez: error.bluez)
          }
          throw error
        }
        try? await Task.sleep(for: min(retry.backoff(after: attempt), remaining))
        if Task.isCancelled { throw BluetoothError(.cancelled, "connecting was cancelled") }
      }
    }
  }

  private func connectOnce(
    _ peripheral: PeripheralIdentifier, deadline: ContinuousClock.Instant
  ) async throws(BluetoothError) {
    let device: Device1
    do {
      guard let found = try objects.proxy(Device1.self, at: peripheral.path) else {
        throw BluetoothError(
          .peripheralNotFound, "bluetoothd does not know \(peripheral) on \(adapterName)")
      }
      device = found
    } catch let error as BluetoothError {
      throw error
    } catch {
      throw BluetoothError(.bluez, "reading \(peripheral): \(error)")
    }
    if device[Device1.connected] == true, device[Device1.servicesResolved] == true { return }
    if device[Device1.connected] != true {
      let remaining = deadline - .now
      guard remaining > .zero else { throw BluetoothError(.timeout, "connect timed out") }
      do throws(BlueZError) {
        try await device.connect(timeout: remaining)
      } catch  where error.code == .alreadyConnected {
        // Someone else (or auto-connect) got there first: wait for the services below.
      } catch {
        throw BluetoothError(error, while: "connecting to \(peripheral)")
      }
    }
    try await waitForServicesResolved(peripheral, deadline: deadline)
  }

  /// Waits for `ServicesResolved` to become true; a `Connected` that falls back to false after
  /// having been true is a disconnection.
  func waitForServicesResolved(
    _ peripheral: PeripheralIdentifier, deadline: ContinuousClock.Instant
  ) async throws(BluetoothError) {
    let (snapshot, _, events) = objects.subscribe()
    guard let initial = snapshot[peripheral.path]?[Device1.interface] else {
      throw BluetoothError(.peripheralNotFound, "\(peripheral) disappeared while connecting")
    }
    if initial[Device1.servicesResolved.name]?.boolValue == true { return }
    let path = peripheral.path
    let name = peripheral.description
    let sawConnected = initial[Device1.connected.name]?.boolValue == true
    do {
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
          var connected = sawConnected
          for await event in events {
            switch event {
            case .propertiesChanged(let changedPath, let interface, _, _, let current)
            where changedPath == path && interface == Device1.interface:
              if current[Device1.servicesResolved.name]?.boolValue == true { return }
              let now = current[Device1.connected.name]?.boolValue == true
              if connected && !now {
                throw BluetoothError(
                  .disconnected, "\(name) disconnected before its services were resolved")
              }
              connected = now
            case .interfacesRemoved(let removedPath, let names)
            where removedPath == path && names.contains(Device1.interface):
              throw BluetoothError(.peripheralNotFound, "\(name) disappeared while connecting")
            case .serviceStopped:
              throw BluetoothError(.serviceUnavailable, "bluetoothd stopped while connecting")
            case .connectionLost(let message):
              throw BluetoothError(.busLost, message)
            default:
              continue
            }
          }
          throw BluetoothError(.cancelled, "waiting for \(name) was cancelled")
        }
        group.addTask {
          try await Task.sleep(until: deadline)
          throw BluetoothError(.timeout, "services of \(name) were not resolved in time")
        }
        defer { group.cancelAll() }
        try await group.next()
      }
    } catch let error as BluetoothError {
      throw error
    } catch {
      throw BluetoothError(.cancelled, "waiting for \(name) was cancelled")
    }
  }

  /// Disconnects a peripheral and waits (up to `timeout`) until bluetoothd reports it.
  /// The corresponding D-Bus member is `org.bluez.Device1.Disconnect`.
  public func disconnect(
    _ peripheral: PeripheralIdentifier, timeout: Duration = .seconds(5)
  ) async throws(BluetoothError) {
    let (snapshot, _, events) = objects.subscribe()
    guard let properties = snapshot[peripheral.path]?[Device1.interface] else { return }
    // ServicesResolved too: bluetoothd 5.66 may never signal Connected = true (see
    // Peripheral.isConnected(_:)).
    if properties[Device1.connected.name]?.boolValue != true,
      properties[Device1.servicesResolved.name]?.boolValue != true
    {
      return
    }
    guard
      let device = try? Device1.make(
        path: peripheral.path, properties: properties, connection: objects.connection)
    else { return }
    do throws(BlueZError) {
      try await device.disconnect()
    } catch  where error.code == .notConnected {
      return
    } catch {
      throw BluetoothError(error, while: "disconnecting \(peripheral)")
    }
    let path = peripheral.path
    _ = await firstMatch(in: events, within: timeout) { event -> Void? in
      switch event {
      case .propertiesChanged(let changedPath, let interface, _, _, let current)
      where changedPath == path && interface == Device1.interface:
        current[Device1.connected.name]?.boolValue == false ? () : nil
      case .interfacesRemoved(let removedPath, _) where removedPath == path: ()
      case .serviceStopped: ()
      default: nil
      }
    }
  }
}
