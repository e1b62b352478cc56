// The peripheral side's connection events: centrals connecting to this adapter and leaving.
import BlueZ

/// A central's link to this peripheral's adapter coming up or going down (CoreBluetooth has
/// no such callback on the peripheral side; BlueZ tells through the central's Device1 object).
public enum CentralConnectionEvent: Sendable, Hashable {
  /// A central connected (`Device1.Connected` of its object became true).
  case connected(Central)
  /// The central's link is down. BlueZ 5.66 does not say why.
  case disconnected(Central)
}

extension PeripheralManager {
  /// Every later ``CentralConnectionEvent`` on this manager's adapter, in order. A central
  /// already connected when it starts is reported only when it leaves, so open it before
  /// ``startAdvertising(_:txPower:)``: a central waiting for the advertisement connects at
  /// once. It follows bluetoothd's objects on the manager's bus connection until the manager
  /// closes or the stream is dropped.
  ///
  /// ```swift
  /// for await event in try await peripheral.connectionEvents() {
  ///   if case .connected(let central) = event { print("\(central) connected") }
  /// }
  /// ```
  public func connectionEvents() async throws(BluetoothError) -> AsyncStream<CentralConnectionEvent>
  {
    let tree = try follower()
    // The manager's shared tree: it outlives this stream (stopped when the manager closes).
    let links = ConnectionEventRelay.events(on: adapterPath, in: tree)
    // Unbounded, as the links it relays: no connection change may be lost.
    let (stream, continuation) = AsyncStream.makeStream(
      of: CentralConnectionEvent.self, bufferingPolicy: .unbounded)
    let relay = Task {
      for await link in links {
        switch link {
        case .connected(let peer): continuation.yield(.connected(Central(peer)))
        case .disconnected(let peer): continuation.yield(.disconnected(Central(peer)))
        case .servicesResolved, .mtuChanged: continue
        }
      }
      continuation.finish()
    }
    continuation.onTermination = { _ in relay.cancel() }
    return stream
  }
}

extension Central {
  /// The central behind a Device1 object of the peripheral's adapter.
  init(_ peer: PeripheralIdentifier) { self.init(identifier: peer.path.rawValue) }
}
