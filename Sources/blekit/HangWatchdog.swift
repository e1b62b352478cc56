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
  private let currentPhase = Mutex<String?>(nil)

  /// Arms the watchdog: after `limit` (whole seconds), unless ``disarm()`` was called first.
  /// Its line ends with what the command last said it was doing (``phase``) and whether
  /// Swift's task pool still runs a task, so a report tells a stuck wait from a starved pool.
  init(after limit: Duration, status: ExitStatus, message: String) {
    let seconds = Int(limit.components.seconds)
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
      guard !disarmed.load(ordering: .acquiring) else { return }
      // A task that only sets a flag: if it has not run a second later, every thread of the
      // pool is blocked; if it has, the command's tasks wait on something that never came.
      let probe = PoolProbe()
      Task.detached { probe.ran.store(true, ordering: .releasing) }
      DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(1)) { [self] in
        guard !disarmed.load(ordering: .acquiring) else { return }
        var notes: [String] = []
        if let phase = currentPhase.withLock({ $0 }) { notes.append("while \(phase)") }
        notes.append(
          probe.ran.load(ordering: .acquiring)
            ? "Swift's task pool still runs tasks" : "Swift's task pool ran no task within 1 s")
        let line = Array("blekit: \(message) (\(notes.joined(separator: "; ")))\n".utf8)
        _ = line.withUnsafeBytes { Syscall.write(STDERR_FILENO, $0.baseAddress, $0.count) }
        ChildProcessGroups.killAll()
        _exit(status.rawValue)
      }
    }
  }

  /// What the command is doing now, for the watchdog's line: "finding 00:AA:01:01:00:01".
  var phase: String? {
    get { currentPhase.withLock { $0 } }
    set { currentPhase.withLock { $0 = newValue } }
  }

  /// The command ended: the watchdog never fires.
  func disarm() { disarmed.store(true, ordering: .releasing) }
}

/// Set by a task the watchdog starts: whether Swift's task pool could run it.
private final class PoolProbe: Sendable {
  let ran = Atomic(false)
}
