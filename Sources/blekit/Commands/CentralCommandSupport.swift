// Shared by the central-side commands: opening a powered central, wall-clock time, and
// writing to standard error.

import ArgumentParsing
import BLEKit

#if canImport(Glibc)
  import Glibc
#endif

/// Opens a central on `adapter` (`nil`: bluetoothd's first adapter) and requires it powered on,
/// the way every central-side command starts; a failure is mapped by ``exitError(_:)``.
func openPoweredCentral(adapter: String?) async throws -> CentralManager {
  let manager: CentralManager
  do {
    manager = try await CentralManager.open(adapter: adapter)
  } catch {
    throw exitError(error)
  }
  do {
    try await manager.requirePoweredOn()
  } catch {
    await manager.close()
    throw exitError(error)
  }
  return manager
}

/// Whether `manager`'s state is `wanted` now or becomes it within `limit`: read from its state
/// updates, so the answer comes as soon as the state does.
func centralState(
  of manager: CentralManager, becomes wanted: CentralState, within limit: Duration
) async -> Bool {
  let updates = await manager.stateUpdates()
  return await withTaskGroup(of: Bool.self) { group in
    group.addTask {
      for await state in updates where state == wanted { return true }
      return false
    }
    group.addTask {
      try? await Task.sleep(for: limit)
      return false
    }
    let first = await group.next() ?? false
    group.cancelAll()
    return first
  }
}

/// `--deadline` and `--idle-timeout` of receive and advertise, each more than 0.
func parseTransferDeadlines(deadline: Duration, idleTimeout: Duration) throws(UsageError)
  -> TransferDeadlines
{
  guard deadline > .zero else { throw .invalid("--deadline must be more than 0 seconds") }
  guard idleTimeout > .zero else { throw .invalid("--idle-timeout must be more than 0 seconds") }
  return TransferDeadlines(deadline: deadline, idleTimeout: idleTimeout)
}

/// Says on standard error how many discoveries a scan dropped because its output could not
/// keep up (see `DiscoveryStream.bufferLimit`): they are not in the output, and not silently.
func noteDroppedDiscoveries(_ scan: DiscoveryStream?) {
  guard let dropped = scan?.droppedCount, dropped > 0 else { return }
  writeStandardError(
    "blekit: \(dropped) discoveries were dropped: the output fell more than "
      + "\(DiscoveryStream.bufferLimit) behind the scan\n")
}

/// Parses `--service` values.
func parseServiceUUIDs(_ values: [String]) throws(UsageError) -> [BluetoothUUID] {
  var result: [BluetoothUUID] = []
  for value in values {
    do {
      result.append(try BluetoothUUID(value))
    } catch {
      throw .invalid(
        "--service: '\(value)' is not a UUID (use 4 or 8 hex digits, or the 128-bit "
          + "8-4-4-4-12 form)")
    }
  }
  return result
}

/// Validates `--min-rssi`.
func parseRSSIFilter(_ value: Int?) throws(UsageError) -> RSSIFilter {
  do {
    return try RSSIFilter(minimum: value)
  } catch {
    throw .invalid("--min-rssi: \(error.description)")
  }
}

/// Whether standard error is a terminal.
var standardErrorIsTerminal: Bool { Syscall.isatty(STDERR_FILENO) == 1 }

/// Writes text to standard error, unbuffered, after flushing standard output.
func writeStandardError(_ text: String) {
  fflush(nil)
  var bytes = Array(text.utf8)[...]
  while !bytes.isEmpty {
    let written = bytes.withUnsafeBytes { Syscall.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    if written < 0 && errno == EINTR { continue }
    guard written > 0 else { return }
    bytes = bytes.dropFirst(written)
  }
}

/// Writes one line on standard output at once, so a pipe sees each line as it comes. A failed
/// write stops the command (see ``StandardOutput``).
func printLine(_ text: String) {
  StandardOutput.writeOrStop(Array((text + "\n").utf8))
}

/// Writes bytes to standard output, unbuffered. A failed write stops the command (see
/// ``StandardOutput``).
func writeStandardOutput(_ bytes: [UInt8]) {
  StandardOutput.writeOrStop(bytes)
}

/// Seconds since the Unix epoch, with milliseconds, for JSON timestamps.
func unixTime() -> Double {
  var spec = timespec()
  Syscall.clock_gettime(CLOCK_REALTIME, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec / 1_000_000) / 1000
}

/// A duration in seconds as a Double.
func seconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
