// A last resort for a command that should have ended: exit with one line once a time limit
// has passed.

import ArgumentParsing
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Ends the process when a command outlives the time it was allowed.
///
/// Used where a command's own limits bound its run time: `pair` (finding, then pairing, each
/// within `--timeout`) and any command after its first signal (cleanup steps of a few seconds
/// each). Past that, something inside is stuck: the watchdog writes `blekit: MESSAGE` and exits
/// with the given status, so a script waiting for the command is never held forever. The timer
/// runs on a Dispatch queue, outside Swift's cooperative pool, so it fires even when no task of
/// the command can run.
final class HangWatchdog: Sendable {
  private let disarmed = Atomic(false)

  /// Arms the watchdog: after `limit` (whole seconds), unless ``disarm()`` was called first.
  init(after limit: Duration, status: ExitStatus, message: String) {
    let seconds = Int(limit.components.seconds)
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
      guard !disarmed.load(ordering: .acquiring) else { return }
      let line = Array("blekit: \(message)\n".utf8)
      _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
      ChildProcessGroups.killAll()
      _exit(status.rawValue)
    }
  }

  /// The command ended: the watchdog never fires.
  func disarm() { disarmed.store(true, ordering: .releasing) }
}
