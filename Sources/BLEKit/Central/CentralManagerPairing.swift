// Pairing from the central side: read the bonding state, pair, trust, unpair.
import BlueZ
import Bluetooth
import DBus

/// A device's bonding state as bluetoothd reports it right now.
public struct PairingState: Sendable, Hashable {
  /// `Device1.Paired`: keys were exchanged.
  public var paired: Bool
  /// `Device1.Bonded`: the keys were stored (BlueZ 5.66 and later; `nil` when not reported).
  public var bonded: Bool?
  /// `Device1.Trusted`: bluetoothd lets the device connect without asking the agent.
  public var trusted: Bool
  /// `Device1.Connected`.
  public var connected: Bool

  public init(paired: Bool, bonded: Bool?, trusted: Bool, connected: Bool) {
    self.paired = paired
    self.bonded = bonded
    self.trusted = trusted
    self.connected = connected
  }
}

extension CentralManager {
  /// Reads the device's pairing state from bluetoothd (not from the cache).
  public func pairingState(of peripheral: PeripheralIdentifier) async throws(BluetoothError)
    -> PairingState
  {
    let device: Device1
    do throws(BlueZError) {
      device = try await Device1.current(at: peripheral.path, on: objects.connection)
    } catch {
      throw BluetoothError(error, while: "reading \(peripheral)")
    }
    return PairingState(
      paired: device[Device1.paired] ?? false, bonded: device[Device1.bonded],
      trusted: device[Device1.trusted] ?? false, connected: device[Device1.connected] ?? false)
  }

  /// Pairs with a device (`Device1.Pair`); bluetoothd asks the agent registered on this
  /// manager's connection (see ``PairingAgent``), else the default agent.
  ///
  /// A device already paired is not paired again: the state is returned as it is. When the task
  /// is cancelled, the pairing is cancelled too (`Device1.CancelPairing`).
  /// - Returns: the state after pairing, and whether this call paired it.
  public func pair(_ peripheral: PeripheralIdentifier, timeout: Duration = .seconds(60))
    async throws(BluetoothError) -> (state: PairingState, newlyPaired: Bool)
  {
    try requirePoweredOn()
    let before = try await pairingState(of: peripheral)
    if before.paired { return (before, false) }
    let device = try await device(peripheral)
    do throws(BlueZError) {
      try await device.pair(timeout: timeout)
    } catch  where error.code == .alreadyExists {
      // Paired between our read and the call: fine.
    } catch {
      if Task.isCancelled || error.code == .timeout {
        // In a cancelled task the call would not be sent: it runs on its own, bounded.
        await runCleanup { try? await device.cancelPairing() }
      }
      if Task.isCancelled { throw BluetoothError(.cancelled, "pairing was cancelled") }
      throw BluetoothError(error, while: "pairing with \(peripheral)")
    }
    return (try await pairingState(of: peripheral), true)
  }

  /// Sets or clears `Device1.Trusted`.
  public func setTrusted(_ trusted: Bool, for peripheral: PeripheralIdentifier)
    async throws(BluetoothError)
  {
    let device = try await device(peripheral)
    do throws(BlueZError) {
      try await device.setTrusted(trusted)
    } catch {
      throw BluetoothError(error, while: "setting Trusted on \(peripheral)")
    }
  }

  /// Removes the device and its keys (`Adapter1.RemoveDevice`): it is no longer paired, and
  /// bluetoothd forgets it until it is discovered again.
  public func unpair(_ peripheral: PeripheralIdentifier) async throws(BluetoothError) {
    let adapter = try await adapter()
    do throws(BlueZError) {
      try await adapter.removeDevice(peripheral.path)
    } catch {
      throw BluetoothError(error, while: "removing \(peripheral)")
    }
  }

  /// Disconnects like ``disconnect(_:timeout:)`` (waiting up to its 5 s for bluetoothd to
  /// report the link down) and ignores any error: for restoring a connection state where a
  /// failure changes nothing for the caller.
  public func disconnectQuietly(_ peripheral: PeripheralIdentifier) async {
    try? await disconnect(peripheral)
  }

  private func device(_ peripheral: PeripheralIdentifier) async throws(BluetoothError) -> Device1 {
    do {
      guard let device = try objects.proxy(Device1.self, at: peripheral.path) else {
        throw BluetoothError(
          .peripheralNotFound, "bluetoothd does not know \(peripheral) on \(adapterName)")
      }
      return device
    } catch let error as BluetoothError {
      throw error
    } catch {
      throw BluetoothError(.bluez, "reading \(peripheral): \(error)")
    }
  }
}
