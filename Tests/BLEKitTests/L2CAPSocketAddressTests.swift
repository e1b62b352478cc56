import Bluetooth
import Testing

@testable import BLEKit

@Suite struct L2CAPSocketAddressTests {
  let address = try! BluetoothAddress("00:AA:01:01:00:01")

  @Test func encodesTheKernelsLayout() {
    // struct sockaddr_l2: family 31 (LE), PSM (LE), bdaddr_t least significant byte first,
    // CID 0, l2_bdaddr_type, one byte of padding.
    let encoded = L2CAPSocketAddress(address: address, kind: .lePublic, psm: 0x0080).bytes
    #expect(encoded == [31, 0, 0x80, 0, 0x01, 0x00, 0x01, 0x01, 0xAA, 0x00, 0, 0, 1, 0])
    #expect(encoded.count == 14)
    let random = L2CAPSocketAddress(address: address, kind: .leRandom, psm: 0x00FF).bytes
    #expect(random[2] == 0xFF && random[3] == 0 && random[12] == 2)
  }

  @Test func decodesWhatTheKernelWrites() {
    let bytes: [UInt8] = [31, 0, 0xC8, 0, 0x00, 0x00, 0x00, 0x00, 0xAA, 0x00, 0x40, 0, 2, 0]
    let decoded = L2CAPSocketAddress(bytes: bytes)
    #expect(decoded?.address == (try! BluetoothAddress("00:AA:00:00:00:00")))
    #expect(decoded?.psm == 200)
    #expect(decoded?.kind == .leRandom)
    #expect(decoded?.kind.addressType == .random)
  }

  @Test func roundTrips() {
    let original = L2CAPSocketAddress(address: address, kind: .lePublic, psm: 0x0025)
    #expect(L2CAPSocketAddress(bytes: original.bytes) == original)
  }

  @Test func refusesAnotherFamilyOrAShortBuffer() {
    var bytes = L2CAPSocketAddress(address: address, kind: .lePublic, psm: 128).bytes
    #expect(L2CAPSocketAddress(bytes: Array(bytes.prefix(12))) == nil)
    bytes[0] = 2  // AF_INET
    #expect(L2CAPSocketAddress(bytes: bytes) == nil)
    bytes[0] = 31
    bytes[12] = 7  // no such address type
    #expect(L2CAPSocketAddress(bytes: bytes) == nil)
  }

  @Test func addressTypeMapsToTheKernelsKinds() {
    #expect(L2CAPSocketAddress.Kind(AddressType.public) == .lePublic)
    #expect(L2CAPSocketAddress.Kind(AddressType.random) == .leRandom)
  }
}

@Suite struct L2CAPPSMTests {
  @Test func onlyTheLERangeIsAPSM() {
    #expect(L2CAPPSM(rawValue: 0) == nil)
    #expect(L2CAPPSM(rawValue: 1)?.rawValue == 1)
    #expect(L2CAPPSM(rawValue: 0x80)?.rawValue == 0x80)
    #expect(L2CAPPSM(rawValue: 0xFF)?.rawValue == 0xFF)
    #expect(L2CAPPSM(rawValue: 0x100) == nil)
    #expect(L2CAPPSM(rawValue: 0x1001) == nil)
  }

  @Test func characteristicValueIsLittleEndianUInt16() {
    #expect(L2CAPPSM(rawValue: 0x00C3)!.characteristicValue == [0xC3, 0x00])
    #expect(L2CAPPSM(characteristicValue: [0x81, 0x00])?.rawValue == 0x81)
    // Not 2 bytes, or not an LE PSM: refused rather than guessed.
    #expect(L2CAPPSM(characteristicValue: [0x81]) == nil)
    #expect(L2CAPPSM(characteristicValue: [0x81, 0x00, 0x00]) == nil)
    #expect(L2CAPPSM(characteristicValue: [0x00, 0x01]) == nil)
    #expect(L2CAPPSM(characteristicValue: [0x00, 0x00]) == nil)
  }

  @Test func applesPSMCharacteristicUUID() {
    #expect(
      BlekitUUID.l2capPSMCharacteristic
        == (try! BluetoothUUID("ABDD3056-28FA-441D-A470-55A75A52553A")))
  }

  @Test func thePSMServiceServesTheValueReadOnly() {
    let service = L2CAPPSMService(psm: L2CAPPSM(rawValue: 0x0085)!)
    #expect(service.service.uuid == BlekitUUID.l2capService)
    #expect(service.characteristic.uuid == BlekitUUID.l2capPSMCharacteristic)
    #expect(service.characteristic.value == [0x85, 0x00])
    #expect(service.characteristic.properties == [.read])
  }
}
