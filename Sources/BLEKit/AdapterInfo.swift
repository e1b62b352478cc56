// AdapterInfo: the local Bluetooth adapters bluetoothd manages, and switching one on or off.
import BlueZ
import Bluetooth
import DBus

/// A local adapter as bluetoothd reports it (`org.bluez.Adapter1`), read from the object tree.
public struct AdapterInfo: Sendable, Hashable {
  /// The short name, e.g. `hci0`.
  public var name: String
  /// bluetoothd's object, e.g. `/org/bluez/hci0`.
  package var path: ObjectPath
  /// bluetoothd's object path for the adapter, e.g. `/org/bluez/hci0`, for diagnosis and for
  /// tools that talk to BlueZ directly.
  public var objectPath: String { path.rawValue }
  /// The controller's address.
  public var address: BluetoothAddress?
  /// `public` or `random`.
  public var addressType: AddressType?
  /// The friendly name (`Alias`, else `Name`).
  public var alias: String?
  /// Whether the controller is switched on.
  public var isPowered: Bool
  /// BlueZ's finer power state (`on`, `off`, `off-enabling`, ...), BlueZ 5.64 and later.
  public var powerState: String?
  /// Whether any client's discovery runs on it.
  public var isDiscovering: Bool
  /// Whether it is discoverable (BR/EDR inquiry scan).
  public var isDiscoverable: Bool?
  /// Whether it accepts pairing.
  public var isPairable: Bool?
  /// The LE roles it supports: `central`, `peripheral`, `central-peripheral`.
  public var roles: [String]

  /// Reads an adapter from its proxy.
  package init(_ adapter: Adapter1) {
    name = adapter.adapterName
    path = adapter.path
    address = adapter[Adapter1.address].flatMap(BluetoothAddress.init(rawValue:))
    addressType = adapter[Adapter1.addressType].flatMap(AddressType.init(rawValue:))
    alias = adapter[Adapter1.alias] ?? adapter[Adapter1.name]
    isPowered = adapter[Adapter1.powered] ?? false
    powerState = adapter[Adapter1.powerState]
    isDiscovering = adapter[Adapter1.discovering] ?? false
    isDiscoverable = adapter[Adapter1.discoverable]
    isPairable = adapter[Adapter1.pairable]
    roles = adapter[Adapter1.roles] ?? []
  }
}

extension CentralManager {
  /// Every adapter bluetoothd manages, sorted by name (hci0, hci1, ..., hci10).
  ///
  /// - Throws: the state's error when bluetoothd is not running or refuses us.
  public func adapters() async throws(BluetoothError) -> [AdapterInfo] {
    try requireService()
    let list = objects.proxies(Adapter1.self).map(AdapterInfo.init)
    return list.sorted { lhs, rhs in
      (lhs.name.count, lhs.name) < (rhs.name.count, rhs.name)
    }
  }

  /// Switches the manager's adapter on or off and waits (up to `timeout`) until bluetoothd
  /// reports the new `Powered` value. Setting the value it already has returns at once.
  /// The corresponding D-Bus member is `org.freedesktop.DBus.Properties.Set` of
  /// `org.bluez.Adapter1.Powered`.
  public func setPowered(_ on: Bool, timeout: Duration = .seconds(10)) async throws(BluetoothError)
  {
    try requireService()
    guard let path = adapterPath,
      let adapter = try? objects.proxy(Adapter1.self, at: path)
    else {
      throw BluetoothError(
        .adapterNotFound,
        requestedAdapter.map { "no Bluetooth adapter named \($0)" } ?? "no Bluetooth adapter")
    }
    if adapter[Adapter1.powered] == on { return }
    let (_, _, events) = objects.subscribe()
    do throws(BlueZError) {
      try await adapter.setPowered(on)
    } catch {
      throw BluetoothError(error, while: "powering \(on ? "on" : "off") \(adapter.adapterName)")
    }
    let name = adapter.adapterName
    let done =
      await firstMatch(in: events, within: timeout) { event -> Bool? in
        switch event {
        case .propertiesChanged(let changed, let interface, _, _, let current)
        where changed == path && interface == Adapter1.interface:
          current[Adapter1.powered.name]?.boolValue == on ? true : nil
        case .interfacesRemoved(let removed, _) where removed == path: false
        case .serviceStopped: false
        default: nil
        }
      } ?? false
    if !done {
      // The reply to Set came; the signal may have been missed only if the adapter went.
      if let now = try? objects.proxy(Adapter1.self, at: path), now[Adapter1.powered] == on {
        return
      }
      throw BluetoothError(
        .timeout, "\(name) did not report Powered = \(on) within \(roughSeconds(timeout))")
    }
  }

  /// Throws unless bluetoothd is on the bus and lets us in.
  func requireService() throws(BluetoothError) {
    switch state {
    case .serviceUnavailable:
      throw BluetoothError(
        .serviceUnavailable, "bluetoothd is not running (org.bluez is not on the system bus)")
    case .unauthorized:
      throw BluetoothError(.unauthorized, "the system bus does not allow talking to bluetoothd")
    default:
      return
    }
  }
}
