// Turns SIGINT, SIGTERM and SIGHUP into task cancellation, so a command can clean up before exiting.

import ArgumentParsing
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Watches SIGINT, SIGTERM and SIGHUP while a command runs.
///
/// The first signal cancels the command's task (the command undoes its BlueZ registrations as
/// its task ends) and remembers the signal's exit status. A second signal exits at once with
/// that status, for a command that does not stop; so does the end of ``stopLimit`` after the
/// first, with a line on standard error, for a command nobody signals twice (a service
/// manager, a test harness). SIGHUP (a closed terminal, a dropped ssh session) is handled like
/// SIGTERM, so `advertise` in a session that ends still unregisters.
final class SignalForwarding: Sendable {
  private let received = Mutex<ExitStatus?>(nil)

  /// How long a command may take to stop after the first signal. Each cleanup step is bounded
  /// by a few seconds (DBus's `defaultCleanupLimit` is 5 s), and a command runs a handful of
  /// them; a command still running after this is stuck, and the process exits without it.
  static let stopLimit: Duration = .seconds(30)

  /// The status of the first signal received, if any: 129 for SIGHUP, 130 for SIGINT,
  /// 143 for SIGTERM.
  var receivedStatus: ExitStatus? { received.withLock { $0 } }

  /// Starts watching; `cancel` runs once, on the first signal. Keep the returned sources alive
  /// for as long as signals should be watched.
  func start(cancel: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
    let watched: [(Int32, String, ExitStatus)] = [
      (SIGHUP, "SIGHUP", .hangUp), (SIGINT, "SIGINT", .interrupted),
      (SIGTERM, "SIGTERM", .terminated),
    ]
    return watched.map { number, name, status in
      // Dispatch sees the signal only once its default action (terminate) is turned off.
      Syscall.signal(number, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
      source.setEventHandler { [self] in
        let isFirst = self.received.withLock { received in
          guard received == nil else { return false }
          received = status
          return true
        }
        if isFirst {
          cancel()
          // Never disarmed: the process normally ends before it fires.
          _ = HangWatchdog(
            after: Self.stopLimit, status: status,
            message: "still stopping \(Self.stopLimit.components.seconds) s after \(name); "
              + "exiting without the rest of the cleanup")
        } else {
          ChildProcessGroups.killAll()
          _exit(status.rawValue)
        }
      }
      source.resume()
      return source
    }
  }
}
