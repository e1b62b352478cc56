// The notes on standard error when a command rides out a fault (bluetoothd restarting).
import BLEKit

/// Tells standard error that a scan paused for bluetoothd or resumed (always, terminal or not:
/// a pause in the output should be explained in logs too).
@Sendable func noteScanInterruption(_ interruption: BluetoothdInterruption) {
  switch interruption {
  case .stopped(let limit):
    writeStandardError("blekit: scan paused: bluetoothd stopped; waiting up to \(limit) for it\n")
  case .resumed: writeStandardError("blekit: bluetoothd is back; scan resumed\n")
  // A scan ends with an error instead of these.
  case .resumeFailed, .didNotReturn, .adapterPoweredOff, .adapterRemoved, .busLost: break
  }
}
