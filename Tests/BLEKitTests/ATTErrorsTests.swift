// A handler's ATT answer: the BluetoothError it throws, and the request error bluetoothd is
// given for it (which bluetoothd turns into the ATT error the central sees).
import BlueZ
import Testing

@testable import BLEKit

@Suite struct ATTErrorsTests {
  @Test(
    arguments: [
      (BluetoothError.ATTCode.readNotPermitted, GattRequestError.notPermitted),
      (.writeNotPermitted, .notPermitted),
      (.requestNotSupported, .notSupported),
      (.invalidOffset, .invalidOffset),
      (.insufficientAuthorization, .notAuthorized),
      (.invalidAttributeValueLength, .invalidValueLength),
    ])
  func eachNamedAnswerReachesBluetoothdByItsName(
    code: BluetoothError.ATTCode, request: GattRequestError
  ) {
    let error = BluetoothError.att(code)
    #expect(error.code == .attError)
    #expect(error.att == code)
    #expect(error.attErrorCode == code.rawValue)
    #expect(error.gattRequestError == request)
  }

  @Test func anyOtherAnswerIsUnlikelyErrorWithItsTextKeptLocal() {
    #expect(
      BluetoothError.att(.unlikelyError, "sensor offline").gattRequestError
        == .failed("sensor offline"))
    #expect(BluetoothError.att(.unlikelyError).message == "unlikely error (0x0e)")
    // An error that is not an ATT answer (a handler's own failure) is Unlikely Error too.
    #expect(BluetoothError(.timeout, "slow").gattRequestError == .failed("slow"))
    #expect(BluetoothError.ATTCode(rawValue: 0x80).description == "ATT error (0x80)")
  }
}
