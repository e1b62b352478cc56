// The loss of the system bus ends every command with exit status 4 ("bluetoothd is not running
// / not on the system bus") and one line, whichever layer reported it.

import ArgumentParsing
import BlueZ
import Testing

@testable import BLEKit
@testable import blekit

@Suite struct BusLossExitStatusTests {
  private func report(_ error: any Error) -> ErrorReport { ErrorReport(error) }

  @Test func commandsExitFour() {
    let lost = BluetoothError(.busLost, "lost the connection to the system bus")
    #expect(report(exitError(lost)).status == .bluetoothUnavailable)
    #expect(report(exitError(lost)).message == "lost the connection to the system bus")
    // A call that failed on the lost connection, wrapped on the way up.
    let call = BluetoothError(
      BlueZError(.busLost, "lost the connection to the bus"), while: "reading a value")
    #expect(call.code == .busLost)
    #expect(report(exitError(call)).status == .bluetoothUnavailable)
    // One line, whichever call noticed first.
    #expect(report(exitError(call)).message == "lost the connection to the system bus")
  }

  @Test func aTransferCutByTheBusLossExitsFour() {
    let cut = BluetoothError.transferInterrupted(
      bytesReceived: 40, chunksReceived: 2,
      cause: BluetoothError(.busLost, "lost the connection to the system bus"))
    let mapped = report(exitError(cut))
    #expect(mapped.status == .bluetoothUnavailable)
    #expect(mapped.message.contains("cut after 40 bytes"))
    #expect(mapped.message.contains("system bus"))
    let byPeer = BluetoothError.transferInterrupted(
      bytesReceived: 40, chunksReceived: 2, cause: BluetoothError(.disconnected, "gone"))
    #expect(report(exitError(byPeer)).status == .disconnected)
    #expect(byPeer.code == .transferInterrupted)
    #expect(byPeer.interruptedTransfer?.cause == .disconnected)
    #expect(byPeer.message.hasPrefix("transfer cut before the end of the message after 40 bytes"))
    // Silence past the idle timeout is a cut too (exit 7), not a timeout of the command (3).
    let silent = BluetoothError.transferInterrupted(
      bytesReceived: 0, chunksReceived: 0, cause: BluetoothError(.timeout, "no notification"))
    #expect(report(exitError(silent)).status == .disconnected)
    // The adapter removed under the transfer: exit 3, as for any missing adapter.
    let removed = BluetoothError.transferInterrupted(
      bytesReceived: 512, chunksReceived: 1,
      cause: BluetoothError(.adapterNotFound, "adapter hci0 was removed"))
    #expect(report(exitError(removed)).status == .adapterNotFound)
    #expect(report(exitError(removed)).message.hasSuffix("(adapter hci0 was removed)"))
  }

  @Test func aPeripheralErrorExitsFourToo() {
    // E.g. advertise's supervise() called just as the bus went away: "the connection is closed".
    let lost = BluetoothError.bluez(BlueZError(.busLost, "the connection is closed"))
    #expect(report(exitError(lost)).status == .bluetoothUnavailable)
    #expect(
      report(exitError(lost)).message == "lost the connection to the system bus")
  }
}
