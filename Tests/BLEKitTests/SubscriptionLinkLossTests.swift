import BlueZ
import DBus
import TestSupport
import Testing

// A subscription whose call bluetoothd never answers ends when the link goes: bluetoothd 5.66
// leaves an AcquireNotify that is pending when the peer disconnects without a reply (seen in
// the lab's pairing suite), and waiting for the reply alone would take BlueZ.gattCallTimeout.
@testable import BLEKit

@Suite(.timeLimit(.minutes(1)))
struct SubscriptionLinkLossTests {
  @Test(arguments: [true, false])
  func aDisconnectEndsAnUnansweredSubscription(preferAcquire: Bool) async throws {
    try await RemoteGattFixture.with(flags: ["notify"]) { bluez, peripheral, remote, kept in
      let started = ContinuousClock.now
      let subscribing = Task { () async -> BluetoothError? in
        do throws(BluetoothError) {
          _ = try await peripheral.notifications(for: remote, preferAcquire: preferAcquire)
          return nil
        } catch {
          return error
        }
      }
      // The call reaches the stand-in before the link goes.
      #expect(await eventually { kept.subscriptions.withLock { $0 } == 1 })
      try bluez.connection.emitPropertiesChanged(
        path: RemoteGattFixture.device, interface: Device1.interface,
        changed: ["Connected": .bool(false)])
      let failure = await subscribing.value
      let elapsed = ContinuousClock.now - started
      guard let error = failure else {
        Issue.record("subscribing succeeded without an answer")
        return
      }
      #expect(error.code == BluetoothError.Code.disconnected)
      #expect(error.message.hasPrefix("subscribing to 6e400002"))
      #expect(error.message.contains("disconnected"))
      #expect(elapsed < .seconds(10), "took \(elapsed), the call's own timeout is 40 s")
      // The abandoned request is withdrawn, so that a later subscription is not refused.
      #expect(await eventually { kept.stops.withLock { $0 } == 1 })
    }
  }
}
