import BlueZ
// Looking again for GATT objects that bluetoothd exports after it said the services were
// resolved. bluetoothd 5.66 sets ServicesResolved from its cache of a known device and then,
// when the peer's database has changed, removes the old objects and exports the new ones;
// seen on the bus (dbus-monitor, 2026-12-04): ServicesResolved = true, then InterfacesAdded
// for the new services 25-220 ms later. A lookup in between finds nothing.
import Bluetooth
import DBus

extension Peripheral {
  /// How long the device's GATT objects must stay unchanged before a lookup that found nothing
  /// is believed.
  static let exportQuiet: Duration = .milliseconds(300)
  /// ``exportQuiet`` for the lookups of one task (tests that export objects themselves, whose
  /// timers a loaded machine can delay past 300 ms); nil is ``exportQuiet``.
  @TaskLocal static var exportQuietInThisTask: Duration?
  /// The longest a lookup waits for bluetoothd to finish exporting.
  static let exportLimit: Duration = .seconds(3)

  /// `lookup`'s result once `isComplete` accepts it; else `lookup` runs again every 50 ms
  /// while bluetoothd is still adding or removing this device's GATT objects, and its last
  /// result comes back once they have not changed for ``exportQuiet`` (or after
  /// ``exportLimit``). A complete first result costs nothing more.
  func lookingUntilExported<Found>(
    _ lookup: () -> Found, isComplete: (Found) -> Bool
  ) async -> Found {
    var found = lookup()
    if isComplete(found) { return found }
    let clock = ContinuousClock()
    let start = clock.now
    var shape = exportedPaths()
    var quietSince = start
    let quiet = Self.exportQuietInThisTask ?? Self.exportQuiet
    while clock.now - start < Self.exportLimit, clock.now - quietSince < quiet {
      do { try await Task.sleep(for: .milliseconds(50)) } catch { break }
      found = lookup()
      if isComplete(found) { return found }
      let now = exportedPaths()
      if now != shape {
        shape = now
        quietSince = clock.now
      }
    }
    return found
  }

  /// The object paths of this device's services and characteristics, as bluetoothd exports
  /// them now.
  private func exportedPaths() -> Set<ObjectPath> {
    Set(objects.proxies(GattService1.self, under: identifier.path).map(\.path))
      .union(objects.proxies(GattCharacteristic1.self, under: identifier.path).map(\.path))
  }
}
