// The notes on standard error when a command rides out a fault (bluetoothd restarting).
import BLEKit

/// Tells standard error that a scan paused for bluetoothd or resumed (always, terminal or not:
/// a pause in the output should be explained in logs too).
@Sendable func noteScanInterruption(_ interruption: ScanInterruption) {
  switch interruption {
  case .paused(let why): writeStandardError("blekit: scan paused: \(why)\n")
  case .resumed: writeStandardError("blekit: bluetoothd is back; scan resumed\n")
  }
}
