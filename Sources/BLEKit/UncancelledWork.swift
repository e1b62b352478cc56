// Work on the way out that a cancelled task (Ctrl-C) must not cut short, bounded in time.
import DBus

/// Runs `work` to its end even when the calling task is cancelled, waiting at most `limit`.
///
/// Closing a manager, disconnecting a peripheral or stopping a subscription from a cancelled
/// task would otherwise do nothing: BLEKit's calls to bluetoothd are cancelled before they are
/// sent. `work` runs in a task of its own instead; when `limit` passes first, that task is
/// cancelled and this returns without waiting for it.
///
/// - Returns: true when `work` finished within `limit`.
@discardableResult
public func runUncancelled(
  within limit: Duration = .seconds(5), _ work: @escaping @Sendable () async -> Void
) async -> Bool {
  await runCleanup(within: limit, work)
}
