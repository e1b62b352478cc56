// Connection events on either side: links coming up and going down, and a peer's services
// resolved (again), as CoreBluetooth's didConnect / didDisconnect / didModifyServices.
import BlueZ
import DBus

/// A change in a link to a peripheral on the central's adapter, whoever set the link up
/// (this process, another program, or the peripheral reconnecting).
public enum ConnectionEvent: Sendable, Hashable {
  /// bluetoothd has a link to the peripheral (`Device1.Connected` became true).
  case connected(PeripheralIdentifier)
  /// The link is down (`Device1.Connected` became false, or bluetoothd forgot the device
  /// while it was connected). BlueZ 5.66 does not say why a link went down.
  case disconnected(PeripheralIdentifier)
  /// bluetoothd finished discovering the peripheral's services (`ServicesResolved` became
  /// true). A second one while the link stays up means the services changed (after the
  /// peripheral's Service Changed indication): look them up again, as CoreBluetooth's
  /// `didModifyServices` asks.
  case servicesResolved(PeripheralIdentifier)
  /// The link's ATT MTU is now `mtu` (an MTU exchange). bluetoothd (5.62 and later) reports it
  /// on each of the peripheral's characteristics once its services are resolved; this comes
  /// once per new value. Values then hold up to `mtu - 3` bytes in one notification or write.
  case mtuChanged(PeripheralIdentifier, mtu: Int)
}

extension CentralManager {
  /// Every later ``ConnectionEvent`` on this manager's adapter, in order (a link already up
  /// when it starts is reported when it goes down). When bluetoothd leaves the bus each of its
  /// links is reported down, and the stream goes on with the next bluetoothd. It ends when the
  /// manager closes or the connection to the system bus is lost; dropping it unsubscribes.
  ///
  /// ```swift
  /// for await event in await central.connectionEvents() {
  ///   if case .disconnected(let peripheral) = event { print("lost \(peripheral)") }
  /// }
  /// ```
  public func connectionEvents() -> AsyncStream<ConnectionEvent> {
    guard let adapter = adapterPath else { return AsyncStream { $0.finish() } }
    return ConnectionEventRelay.events(on: adapter, in: objects)
  }
}

/// Turns bluetoothd's Device1 changes under one adapter into ``ConnectionEvent``s, for the
/// central and the peripheral side alike.
enum ConnectionEventRelay {
  /// The events of links on `adapter`, from `objects`' Device1 changes. `onEnd` runs once the
  /// stream has ended (however it ended).
  static func events(
    on adapter: ObjectPath, in objects: BlueZObjectTree,
    onEnd: @escaping @Sendable () -> Void = {}
  ) -> AsyncStream<ConnectionEvent> {
    let device = Device1.interface
    let characteristic = GattCharacteristic1.interface
    let connection = objects.connection
    let (snapshot, _, events) = objects.subscribe { event in
      switch event {
      case .propertiesChanged(let path, let interface, let changed, _, _):
        (interface == device && path.parent == adapter
          && (changed[Device1.connected.name] != nil
            || changed[Device1.servicesResolved.name] != nil))
          || (interface == characteristic && changed[GattCharacteristic1.mtu.name] != nil
            && Self.device(of: path)?.parent == adapter)
      case .interfacesAdded(let path, let interfaces):
        interfaces[device] != nil && path.parent == adapter
      case .interfacesRemoved(let path, let interfaces):
        interfaces.contains(device) && path.parent == adapter
      case .connectionLost: true
      default: false
      }
    }
    // Unbounded: each event is a link changing state, which a watcher must not miss.
    let (stream, continuation) = AsyncStream.makeStream(
      of: ConnectionEvent.self, bufferingPolicy: .unbounded)
    // The links up when the stream starts, so that their end is reported too.
    var alreadyUp: Set<PeripheralIdentifier> = []
    for (path, interfaces) in snapshot where path.parent == adapter {
      guard let current = interfaces[device] else { continue }
      let properties = Device1(uncheckedPath: path, properties: current, connection: connection)
      if properties[Device1.connected] == true,
        let peer = Self.peer(properties, at: path, adapter: adapter)
      {
        alreadyUp.insert(peer)
      }
    }
    let relay = Task { [alreadyUp] in
      var connected = alreadyUp
      // The last MTU reported per device, so that one exchange (signalled on every
      // characteristic) is one event.
      var mtus: [ObjectPath: Int] = [:]
      for await event in events {
        switch event {
        case .propertiesChanged(let path, let interface, let changed, _, _)
        where interface == characteristic:
          guard let value = changed[GattCharacteristic1.mtu.name]?.uint16Value,
            let devicePath = Self.device(of: path), mtus[devicePath] != Int(value),
            let properties = try? objects.proxy(Device1.self, at: devicePath),
            let peripheral = Self.peer(properties, at: devicePath, adapter: adapter)
          else { continue }
          mtus[devicePath] = Int(value)
          continuation.yield(.mtuChanged(peripheral, mtu: Int(value)))
        case .propertiesChanged(let path, _, let changed, _, let current):
          let properties = Device1(uncheckedPath: path, properties: current, connection: connection)
          guard let peripheral = Self.peer(properties, at: path, adapter: adapter) else { continue }
          if let isUp = changed[Device1.connected.name]?.boolValue {
            if isUp, connected.insert(peripheral).inserted {
              continuation.yield(.connected(peripheral))
            } else if !isUp, connected.remove(peripheral) != nil {
              mtus[path] = nil
              continuation.yield(.disconnected(peripheral))
            }
          }
          if changed[Device1.servicesResolved.name]?.boolValue == true {
            continuation.yield(.servicesResolved(peripheral))
          }
        case .interfacesAdded(let path, let interfaces):
          // A peer bluetoothd had no object for (a central connecting to this adapter for
          // the first time) may be announced already connected, with no PropertiesChanged of
          // Connected to follow.
          guard let current = interfaces[device] else { continue }
          let properties = Device1(uncheckedPath: path, properties: current, connection: connection)
          guard properties[Device1.connected] == true,
            let peripheral = Self.peer(properties, at: path, adapter: adapter)
          else { continue }
          if connected.insert(peripheral).inserted {
            continuation.yield(.connected(peripheral))
          }
          if properties[Device1.servicesResolved] == true {
            continuation.yield(.servicesResolved(peripheral))
          }
        case .interfacesRemoved(let path, _):
          mtus[path] = nil
          for peripheral in connected where peripheral.path == path {
            connected.remove(peripheral)
            continuation.yield(.disconnected(peripheral))
          }
        case .connectionLost:
          for peripheral in connected { continuation.yield(.disconnected(peripheral)) }
          continuation.finish()
          return
        default:
          continue
        }
      }
      continuation.finish()
    }
    continuation.onTermination = { _ in
      relay.cancel()
      onEnd()
    }
    return stream
  }

  /// The peer behind a Device1 object at `path` under `adapter`; `nil` without a valid
  /// `Address`.
  static func peer(_ properties: Device1, at path: ObjectPath, adapter: ObjectPath)
    -> PeripheralIdentifier?
  {
    guard let text = properties[Device1.address], let address = BluetoothAddress(rawValue: text)
    else { return nil }
    return PeripheralIdentifier(address: address, adapter: adapter, path: path)
  }

  /// The device a characteristic's path belongs to (`/org/bluez/hci0/dev_…/service000a/
  /// char000b` → `/org/bluez/hci0/dev_…`).
  static func device(of characteristic: ObjectPath) -> ObjectPath? {
    characteristic.parent?.parent
  }
}
