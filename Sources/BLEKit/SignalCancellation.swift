// Ctrl-C for command-line programs: a signal cancels the program's work, safely under Swift 6.
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs `operation` in a task of its own and cancels that task when the process receives one
/// of `signals` (by default Ctrl-C's `SIGINT` and `SIGTERM`).
///
/// A command-line program wraps its work in this call so that Ctrl-C ends it through Swift's
/// cancellation: the work's BLEKit calls throw, and its way out
/// (``Peripheral/disconnectOnExit(within:)``, ``PeripheralManager/close()``) still runs.
///
/// ```swift
/// do {
///   try await runCancellingOnSignals {
///     let central = try await CentralManager.open(adapter: "hci0")
///     try await central.waitUntilPoweredOn(timeout: .seconds(5))
///     // ...
///     await central.close()
///   }
/// } catch is CancellationError {
///   exit(130)  // the shell's status for a program ended by Ctrl-C
/// }
/// ```
///
/// The signals are read by Dispatch on a queue of BLEKit's own, never on the main actor. That
/// is what makes this safe under Swift 6: a signal handler written in top-level code belongs
/// to the main actor, and run on another queue (such as `DispatchQueue.global()`) it stops the
/// program at the actor check. Wrap the program's whole work in one call: from the first call
/// on, the signals no longer end the process by their default action (Dispatch keeps them
/// for its signal sources), and between calls they do nothing.
///
/// Cancelling the calling task cancels `operation` too.
///
/// - Parameters:
///   - signals: The signals that cancel `operation`.
///   - operation: The program's work.
/// - Returns: What `operation` returned, when no signal arrived.
/// - Throws: `CancellationError` when one of `signals` arrived while `operation` ran, once
///   `operation` has ended (whatever it returned or threw); otherwise what `operation` threw.
public func runCancellingOnSignals<Success: Sendable>(
  _ signals: [Int32] = [SIGINT, SIGTERM],
  _ operation: @escaping @Sendable () async throws -> Success
) async throws -> Success {
  // Dispatch replaces a signal's disposition with its own handler when it first watches the
  // signal, which it does a moment after `resume()`; ignoring the signal until then keeps its
  // default action from ending the process. A disposition Dispatch has set is left alone, so
  // a later call hears the signals too (Dispatch installs its handler once per process).
  for number in Set(signals) {
    #if canImport(Glibc)
      var current = sigaction()
      Syscall.sigaction(number, nil, &current)
      if current.__sigaction_handler.sa_handler != nil { continue }  // not SIG_DFL
    #endif
    Syscall.signal(number, SIG_IGN)
  }
  let work = Task { try await operation() }
  let interrupted = Mutex(false)
  let queue = DispatchQueue(label: "org.blekit.signals")
  let sources = Set(signals).map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
    source.setEventHandler {
      interrupted.withLock { $0 = true }
      work.cancel()
    }
    source.resume()
    return source
  }
  let result = await withTaskCancellationHandler {
    await work.result
  } onCancel: {
    work.cancel()
  }
  for source in sources { source.cancel() }
  if interrupted.withLock({ $0 }) { throw CancellationError() }
  return try result.get()
}
