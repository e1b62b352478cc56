// The loss of the system bus ends every command with exit status 4 ("bluetoothd is not running
// / not on the system bus") and one line, whichever layer reported it.

import ArgumentParsing
import BlueZ
import Testing

@testable import BLEKit
@testable import blekit

@Suite struct BusLossExitStatusTests {
  private func report(_ error: any Error) -> ErrorReport { ErrorReport(error) }

  @Test func centralCommandsExitFour() {
    let lost = CentralError(.busLost, "lost the connection to the system bus")
    #expect(report(centralCLIError(lost)).status == .bluetoothUnavailable)
    #expect(report(centralCLIError(lost)).message == "lost the connection to the system bus")
    // GATT commands share the mapping.
    #expect(report(gattCLIError(lost)).status == .bluetoothUnavailable)
    // A call that failed on the lost connection, wrapped on the way up.
    let call = CentralError(
      BlueZError(.busLost, "lost the connection to the bus"), while: "reading a value")
    #expect(call.code == .busLost)
    #expect(report(centralCLIError(call)).status == .bluetoothUnavailable)
  }

  @Test func aTransferCutByTheBusLossExitsFour() {
    let cut = TransferInterrupted(
      bytesReceived: 40, chunksReceived: 2,
      cause: CentralError(.busLost, "lost the connection to the system bus"))
    let mapped = report(centralCLIError(cut))
    #expect(mapped.status == .bluetoothUnavailable)
    #expect(mapped.message.contains("after 40 bytes"))
    #expect(mapped.message.contains("system bus"))
    let byPeer = TransferInterrupted(
      bytesReceived: 40, chunksReceived: 2, cause: CentralError(.disconnected, "gone"))
    #expect(report(centralCLIError(byPeer)).status == .disconnected)
  }

  @Test func advertiseExitsFour() {
    let lost = PeripheralManagerError.bluez(BlueZError(.busLost, "lost the connection to the bus"))
    #expect(report(AdvertiseCommand.cliError(lost)).status == .bluetoothUnavailable)
  }
}
