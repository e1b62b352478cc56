import Bluetooth
import Testing

@Suite struct AssignedNumbersTests {
  @Test func services() {
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x1800)) == "Generic Access")
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x1801)) == "Generic Attribute")
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x180A)) == "Device Information")
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x180F)) == "Battery")
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x180D)) == "Heart Rate")
    #expect(AssignedNumbers.serviceName(BluetoothUUID(uint16: 0x2A19)) == nil)
    #expect(AssignedNumbers.services.count >= 40)
  }

  @Test func characteristics() {
    #expect(AssignedNumbers.characteristicName(BluetoothUUID(uint16: 0x2A00)) == "Device Name")
    #expect(AssignedNumbers.characteristicName(BluetoothUUID(uint16: 0x2A01)) == "Appearance")
    #expect(AssignedNumbers.characteristicName(BluetoothUUID(uint16: 0x2A05)) == "Service Changed")
    #expect(AssignedNumbers.characteristicName(BluetoothUUID(uint16: 0x2A19)) == "Battery Level")
    #expect(AssignedNumbers.characteristics.count >= 40)
  }

  @Test func descriptors() {
    #expect(
      AssignedNumbers.descriptorName(BluetoothUUID(uint16: 0x2902))
        == "Client Characteristic Configuration")
    #expect(
      AssignedNumbers.descriptorName(BluetoothUUID(uint16: 0x2901))
        == "Characteristic User Description")
  }

  @Test func companies() {
    #expect(AssignedNumbers.companyName(0x004C) == "Apple, Inc.")
    #expect(AssignedNumbers.companyName(0x0059) == "Nordic Semiconductor ASA")
    #expect(AssignedNumbers.companyName(0xFFFF)?.contains("testing") == true)
    #expect(AssignedNumbers.companyName(0x7777) == nil)
    #expect(AssignedNumbers.companies.count >= 30)
    #expect(AssignedNumbers.testCompanyID == 0xFFFF)
  }

  @Test func blekitNames() {
    #expect(AssignedNumbers.serviceName(BlekitUUID.transferService) == "blekit Transfer Service")
    #expect(
      AssignedNumbers.characteristicName(BlekitUUID.transferCharacteristic)
        == "blekit Transfer Characteristic")
    #expect(
      AssignedNumbers.name(for: BlekitUUID.sequencedTransferCharacteristic)
        == "blekit Sequenced Transfer Characteristic")
  }

  @Test func nameForAnyKind() throws {
    #expect(
      AssignedNumbers.name(for: try BluetoothUUID("2902"))
        == "Client Characteristic Configuration")
    #expect(
      AssignedNumbers.name(for: try BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fb"))
        == "Battery")
    // A 128-bit UUID that merely contains 180f is not the Battery service.
    #expect(
      AssignedNumbers.name(for: try BluetoothUUID("0000180f-0000-1000-8000-00805f9b34fc"))
        == nil)
  }

  @Test func tablesHaveNoEmptyNames() {
    for table in [
      AssignedNumbers.services, AssignedNumbers.characteristics,
      AssignedNumbers.descriptors, AssignedNumbers.companies,
    ] {
      #expect(table.values.allSatisfy { !$0.isEmpty })
    }
  }
}
