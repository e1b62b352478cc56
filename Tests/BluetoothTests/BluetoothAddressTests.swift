import Bluetooth
import Testing

@Suite struct BluetoothAddressTests {
  @Test func parsesAndCanonicalisesToUppercase() throws {
    let address = try BluetoothAddress("00:aa:01:01:00:01")
    #expect(address.rawValue == "00:AA:01:01:00:01")
    #expect(address.description == "00:AA:01:01:00:01")
    #expect(address.bytes == [0x00, 0xAA, 0x01, 0x01, 0x00, 0x01])
    #expect(address == (try BluetoothAddress("00:AA:01:01:00:01")))
  }

  @Test(arguments: [
    "", "00:AA:01:01:00", "00:AA:01:01:00:01:02", "00-AA-01-01-00-01", "00AA01010001",
    "0:AA:01:01:00:01", "00:AA:01:01:00:1", "00:AA:01:01:00:0G", "00:AA:01:01:00:01 ",
    " 00:AA:01:01:00:01", "00:AA:01:01:00::1", "00:AA:01:01:00:01\n", "ZZ:ZZ:ZZ:ZZ:ZZ:ZZ",
    "00:AA:01:01:000:1",
  ])
  func rejectsMalformed(text: String) {
    #expect(throws: BluetoothAddress.ParseError(input: text)) { try BluetoothAddress(text) }
    #expect(BluetoothAddress(rawValue: text) == nil)
  }

  @Test func errorNamesTheInput() {
    #expect(
      BluetoothAddress.ParseError(input: "nope").description
        .hasPrefix("invalid Bluetooth address \"nope\""))
  }

  @Test func objectPathComponent() throws {
    let address = try BluetoothAddress("00:aa:01:00:00:00")
    #expect(address.objectPathComponent == "dev_00_AA_01_00_00_00")
    #expect(
      address.devicePath(adapterPath: "/org/bluez/hci0")
        == "/org/bluez/hci0/dev_00_AA_01_00_00_00")
    #expect(BluetoothAddress(objectPathComponent: "dev_00_AA_01_00_00_00") == address)
    #expect(BluetoothAddress(objectPathComponent: "dev_00_aa_01_00_00_00") == address)
    #expect(BluetoothAddress(objectPathComponent: "00_AA_01_00_00_00") == nil)
    #expect(BluetoothAddress(objectPathComponent: "dev_00:AA:01:00:00:00") == nil)
    #expect(BluetoothAddress(objectPathComponent: "dev_00_AA_01_00_00") == nil)
    #expect(BluetoothAddress(objectPathComponent: "service0001") == nil)
  }

  @Test func bytesInit() {
    #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])?.rawValue == "01:02:03:04:05:06")
    #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5]) == nil)
  }

  @Test func addressTypeMatchesBlueZStrings() {
    #expect(AddressType(rawValue: "public") == .public)
    #expect(AddressType(rawValue: "random") == .random)
    #expect(AddressType(rawValue: "Random") == nil)
  }

  @Test func randomAddressKindFromTopBits() throws {
    #expect(try BluetoothAddress("C0:00:00:00:00:01").randomAddressKind == .staticAddress)
    #expect(try BluetoothAddress("40:00:00:00:00:01").randomAddressKind == .resolvablePrivate)
    #expect(try BluetoothAddress("3F:00:00:00:00:01").randomAddressKind == .nonResolvablePrivate)
    #expect(try BluetoothAddress("80:00:00:00:00:01").randomAddressKind == .reserved)
  }

  @Test func ordering() throws {
    #expect(try BluetoothAddress("00:AA:01:00:00:00") < BluetoothAddress("00:AA:01:01:00:01"))
  }
}
