import BlueZ
import Testing

// When and how soon a failed connection attempt is tried again.
@testable import BLEKit

@Suite struct ConnectRetryPolicyTests {
  @Test func retryBackoffDoublesUpToTheCap() {
    let policy = ConnectRetryPolicy(
      maximumAttempts: 5, initialBackoff: .milliseconds(250), maximumBackoff: .seconds(1))
    #expect(policy.backoff(after: 1) == .milliseconds(250))
    #expect(policy.backoff(after: 2) == .milliseconds(500))
    #expect(policy.backoff(after: 3) == .seconds(1))
    #expect(policy.backoff(after: 9) == .seconds(1))
  }

  @Test func transientFailuresAreRetried() {
    func error(_ code: BlueZError.Code, _ message: String) -> BluetoothError {
      BluetoothError(
        .bluez, message,
        bluez: BlueZError(code, message, name: "org.bluez.Error.\(code.rawValue)"))
    }
    #expect(ConnectRetryPolicy.isTransient(error(.inProgress, "In Progress")))
    #expect(ConnectRetryPolicy.isTransient(error(.failed, "le-connection-abort-by-local")))
    #expect(ConnectRetryPolicy.isTransient(BluetoothError(.disconnected, "dropped")))
    #expect(!ConnectRetryPolicy.isTransient(error(.notPermitted, "nope")))
    #expect(!ConnectRetryPolicy.isTransient(error(.failed, "Input/output error")))
    #expect(!ConnectRetryPolicy.isTransient(BluetoothError(.adapterNotFound, "no hci7")))
  }
}
