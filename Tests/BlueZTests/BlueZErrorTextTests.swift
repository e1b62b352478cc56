// What blekit reads from the text of bluetoothd's errors, in the one place it does: the ATT
// code of a failed GATT request, and whether a failed Connect is worth another attempt.
import Testing

@testable import BlueZ

@Suite struct BlueZErrorTextTests {
  private func failed(_ text: String) -> BlueZError {
    BlueZError(.failed, text, name: "org.bluez.Error.Failed")
  }

  @Test(arguments: [
    ("Operation failed with ATT error: 0x01", UInt8(0x01)),
    ("Operation failed with ATT error: 0x0b", UInt8(0x0b)),
    ("Operation failed with ATT error: 0x80", UInt8(0x80)),
    ("Operation failed with ATT error: 0xFE", UInt8(0xFE)),
  ])
  func anATTCodeIsReadFromFailedsText(_ text: String, _ code: UInt8) {
    #expect(failed(text).attErrorCode == code)
  }

  @Test func otherTextsAndNamesHaveNoATTCode() {
    #expect(failed("Operation failed").attErrorCode == nil)
    #expect(failed("Operation failed with ATT error: 0x").attErrorCode == nil)
    #expect(failed("Operation failed with ATT error: 0xzz").attErrorCode == nil)
    #expect(failed("Not connected").attErrorCode == nil)
    // Named ATT errors come with a name of their own and no code.
    let named = BlueZError(
      .notPermitted, "Read not permitted", name: "org.bluez.Error.NotPermitted")
    #expect(named.attErrorCode == nil)
    // Only bluetoothd's Failed carries it.
    #expect(
      BlueZError(.other, "Operation failed with ATT error: 0x0b", name: "org.example.Error")
        .attErrorCode == nil)
  }

  @Test func connectFailuresWorthAnotherAttempt() {
    // BlueZ 5.66 and later.
    #expect(failed("le-connection-abort-by-local").isTransientConnectFailure)
    #expect(failed("le-connection-abort-by-remote").isTransientConnectFailure)
    #expect(failed("le-connection-timeout").isTransientConnectFailure)
    // Older bluetoothd: strerror's text.
    #expect(failed("Software caused connection abort").isTransientConnectFailure)
    #expect(failed("Connection refused").isTransientConnectFailure)
    #expect(failed("Connection timed out").isTransientConnectFailure)
    #expect(!failed("Input/output error").isTransientConnectFailure)
    #expect(!failed("le-connection-key-missing").isTransientConnectFailure)
    // Another name is its own answer, whatever its text.
    #expect(
      !BlueZError(.notPermitted, "timeout", name: "org.bluez.Error.NotPermitted")
        .isTransientConnectFailure)
  }

  /// bluetoothd's answers to a refused ReadValue/WriteValue (BlueZ 5.66 create_gatt_dbus_error),
  /// each with the ATT error it stands for, read from the name and the text it comes with.
  @Test(
    arguments: [
      ("org.bluez.Error.NotPermitted", "Read not permitted", 0x02),
      ("org.bluez.Error.NotPermitted", "Write not permitted", 0x03),
      ("org.bluez.Error.NotPermitted", "Not paired", 0x05),
      ("org.bluez.Error.NotAuthorized", "Not Authorized", 0x08),
      ("org.bluez.Error.NotSupported", "Not Supported", 0x06),
      ("org.bluez.Error.InvalidArguments", "Invalid offset", 0x07),
      ("org.bluez.Error.InvalidArguments", "Invalid Length", 0x0D),
      ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0f", 0x0F),
      ("org.bluez.Error.NotPermitted", "Not allowed", nil),
      ("org.bluez.Error.InProgress", "In Progress", nil),
      ("com.example.Error.NotPermitted", "Not paired", nil),
    ] as [(String, String, UInt8?)])
  func gattAnswersNameTheirATTError(name: String, text: String, code: UInt8?) {
    #expect(BlueZError(name: name, message: text).gattATTErrorCode == code)
  }
}
