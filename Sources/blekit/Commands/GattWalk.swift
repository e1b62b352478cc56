// The walk `explore` and `clone` share: open a session to the device, then read its whole GATT
// tree (services, characteristics, descriptors and their values) with BLEKit's exploration.

import BLEKit

/// A connected device and its GATT tree, read once.
struct GattWalk: Sendable {
  let session: GattSession
  let tree: [ExploredService]

  var peripheral: Peripheral { session.peripheral }

  /// Finds and connects to `target` (see ``GattSession/open(_:adapter:timeout:refresh:progress:)``)
  /// and reads the tree per `reads`, connecting again at most as `reconnects` allows when the
  /// link drops over a value (see ``ExploreCommand``). The session stays open for the caller to close; a failure
  /// closes it.
  static func open(
    _ target: PeripheralTarget, adapter: String?, timeout: Duration, refresh: Bool = false,
    reads: ExplorationReads, reconnects: ExplorationReconnects = .none,
    progress: ProgressReport
  ) async throws -> GattWalk {
    let session = try await GattSession.open(
      target, adapter: adapter, timeout: timeout, refresh: refresh,
      progress: progress.callAsFunction)
    progress("reading the GATT tree of \(session.peripheral.identifier)")
    do {
      return GattWalk(
        session: session,
        tree: try await session.peripheral.explore(reads: reads, reconnects: reconnects))
    } catch {
      await session.close()
      throw exitError(error)
    }
  }
}
