// What happened to bluetoothd or the adapter under something long-running: one model for a
// scan that resumes after a restart and for a supervised PeripheralManager.

/// What happened to bluetoothd, or to the adapter, under a scan with
/// ``ScanOptions/resumeWithin`` (``CentralManager/scan(_:onInterruption:)``) or a supervised
/// ``PeripheralManager`` (``PeripheralManager/supervise(returnWithin:)``): one model for both
/// sides.
///
/// Both report ``stopped(waitingUpTo:)`` when bluetoothd leaves the bus and ``resumed`` when it
/// is back and work goes on. A scan's end is its stream's error (a power-off, bluetoothd gone
/// for longer than the wait, the bus lost); a supervision stream ends after one of the last
/// five cases.
public enum BluetoothdInterruption: Sendable, Equatable {
  /// bluetoothd left the bus; the scan or the registrations wait up to this long for it.
  case stopped(waitingUpTo: Duration)
  /// bluetoothd returned: discovery runs again, or every service and the advertisement are
  /// registered again.
  case resumed
  /// bluetoothd returned but registering again failed, with bluetoothd's reason (the stream
  /// ends).
  case resumeFailed(String)
  /// bluetoothd did not return within the wait (the stream ends).
  case didNotReturn(Duration)
  /// The adapter was powered off while bluetoothd kept running (the stream ends).
  case adapterPoweredOff
  /// The adapter was removed (its controller unplugged or unbound) while bluetoothd kept
  /// running (the stream ends).
  case adapterRemoved
  /// The connection to the system bus was lost (the bus daemon stopped or restarted): nothing
  /// can be registered again on it (the stream ends).
  case busLost
}
