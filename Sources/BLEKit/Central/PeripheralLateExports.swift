// Looking again for GATT objects that bluetoothd exports after it said the services were
// resolved. bluetoothd 5.66 sets ServicesResolved from its cache of a known device and then,
// when the peer's database has changed, removes the old objects and exports the new ones
// (InterfacesAdded for the new services comes tens to a few hundred milliseconds after
// ServicesResolved = true). A lookup in between finds nothing. The wait follows the object
// tree's changes; it never polls.
import BlueZ
import Bluetooth
import DBus

extension Peripheral {
  /// How long a lookup waits for bluetoothd to finish exporting a device's GATT objects.
  struct ExportWait: Sendable, Hashable {
    /// How long the device's GATT objects must stay unchanged before a lookup that found
    /// nothing is believed; `nil`: changes do not end the wait, only `limit` does.
    var quiet: Duration?
    /// The longest a lookup waits.
    var limit: Duration

    /// bluetoothd's own pace: it exports a changed database's objects one after another
    /// within a few hundred milliseconds of ServicesResolved (5.66).
    static let bluetoothd = ExportWait(quiet: .milliseconds(300), limit: .seconds(3))
  }

  /// What a change in the object tree means to a lookup waiting for this device's exports.
  enum ExportChange: Sendable, Equatable {
    /// A GATT service or characteristic of the device was added or removed: look again.
    case changed
    /// The device disconnected or went away, or bluetoothd left: nothing more will come.
    case ended
    /// The wait's timer fired.
    case timer

    /// The meaning of `event` for the device at `device`; `nil` when it has none.
    static func of(_ event: BlueZObjectEvent, device: ObjectPath) -> ExportChange? {
      switch event {
      case .interfacesAdded(let path, let interfaces):
        guard path.isDescendant(of: device) else { return nil }
        return interfaces[GattService1.interface] != nil
          || interfaces[GattCharacteristic1.interface] != nil ? .changed : nil
      case .interfacesRemoved(let path, let names):
        if path == device, names.contains(Device1.interface) { return .ended }
        guard path.isDescendant(of: device) else { return nil }
        return names.contains(GattService1.interface)
          || names.contains(GattCharacteristic1.interface) ? .changed : nil
      case .propertiesChanged(device, Device1.interface, _, _, let current):
        // Connected, or ServicesResolved (see ``isConnected(_:)``).
        let connected =
          current[Device1.connected.name]?.boolValue == true
          || current[Device1.servicesResolved.name]?.boolValue == true
        return connected ? nil : .ended
      case .serviceStopped, .connectionLost, .accessDenied: return .ended
      case .propertiesChanged, .serviceStarted: return nil
      }
    }
  }

  /// `lookup`'s result once `isComplete` accepts it. Otherwise `lookup` runs again at each
  /// change to this device's GATT objects (as the object tree reports them), and its last
  /// result comes back once they have not changed for ``ExportWait/quiet``, after
  /// ``ExportWait/limit``, or when the device disconnects. A complete first result costs
  /// nothing more.
  func lookingUntilExported<Found>(
    _ lookup: () -> Found, isComplete: (Found) -> Bool, wait: ExportWait? = nil
  ) async -> Found {
    var found = lookup()
    if isComplete(found) { return found }
    let wait = wait ?? exportWait
    let device = identifier.path
    let (changes, change) = AsyncStream.makeStream(
      of: ExportChange.self, bufferingPolicy: .unbounded)
    let observation = objects.observe { event in
      if let meaning = ExportChange.of(event, device: device) { change.yield(meaning) }
    }
    observation.onEnd { change.yield(.ended) }
    defer {
      observation.cancel()
      change.finish()
    }
    // Again, now that every later change is heard: the first look may have been just before
    // an export, or the device may have gone meanwhile.
    found = lookup()
    if isComplete(found) { return found }
    guard let proxy = try? objects.proxy(Device1.self, at: device), Self.isConnected(proxy) else {
      return found
    }
    let clock = ContinuousClock()
    let end = clock.now + wait.limit
    var due = wait.quiet.map { min(clock.now + $0, end) } ?? end
    var timer = Self.timer(yielding: change, at: due)
    defer { timer.cancel() }
    for await next in changes {
      switch next {
      case .ended:
        return found
      case .changed:
        found = lookup()
        if isComplete(found) { return found }
        // The quiet period starts again; the timer already set finds that out when it fires.
        if let quiet = wait.quiet { due = min(clock.now + quiet, end) }
      case .timer:
        guard clock.now < due else { return found }
        timer = Self.timer(yielding: change, at: due)
      }
    }
    return found  // cancelled
  }

  /// A task that yields `.timer` to `change` at `instant`, unless cancelled first.
  private static func timer(
    yielding change: AsyncStream<ExportChange>.Continuation, at instant: ContinuousClock.Instant
  ) -> Task<Void, Never> {
    Task {
      do { try await Task.sleep(until: instant) } catch { return }
      change.yield(.timer)
    }
  }
}
