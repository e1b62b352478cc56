// A last resort for commands with a bounded run time: exit with one line if the command is
// still running well past every limit it was given.

import ArgumentParsing
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Ends the process when a command outlives the time its own limits allow.
///
/// A command whose every step has a timeout (`pair`: finding, then pairing, each within
/// `--timeout`) cannot take longer than their sum unless something inside it is stuck. The
/// watchdog then writes one line and exits with ``ExitStatus/timedOut``, so a script waiting
/// for the command is never held forever. The timer runs on a Dispatch queue, outside Swift's
/// cooperative pool, so it fires even when no task of the command can run.
final class HangWatchdog: Sendable {
  private let disarmed = Atomic(false)

  /// Arms the watchdog: after `limit`, unless ``disarm()`` was called first.
  init(after limit: Duration, command: String) {
    let seconds = Int(limit.components.seconds)
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
      guard !disarmed.load(ordering: .acquiring) else { return }
      let line = Array(
        ("blekit: \(command) is still running after \(seconds) s, past all of its time limits "
          + "(a blekit bug: please report it); exiting\n").utf8)
      _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
      _exit(ExitStatus.timedOut.rawValue)
    }
  }

  /// The command ended (or reached a part with no time limit): the watchdog never fires.
  func disarm() { disarmed.store(true, ordering: .releasing) }
}
