// The advertisement monitor a passive scan registers: patterns derived from the filters, RSSI
// thresholds, and the exported properties bluetoothd reads.

import Bluetooth
import DBus
import Testing

@testable import BLEKit
@testable import BlueZ

@Suite struct PassiveScanPatternsTests {
  typealias Pattern = AdvertisementMonitor.Pattern

  @Test func aCompanyIDMatchesManufacturerDataStartingWithItsLittleEndianBytes() {
    let options = ScanOptions(manufacturerIDs: [0xFFFF, 0x004C], mode: .passive)
    #expect(
      options.monitorPatterns == [
        Pattern(startPosition: 0, adType: 0xFF, content: [0xFF, 0xFF]),
        Pattern(startPosition: 0, adType: 0xFF, content: [0x4C, 0x00]),
      ])
  }

  @Test func a16BitServiceMatchesBothListsAndItsServiceData() {
    let options = ScanOptions(services: [BluetoothUUID(uint16: 0x180D)], mode: .passive)
    #expect(
      options.monitorPatterns == [
        Pattern(adType: 0x02, content: [0x0D, 0x18]),
        Pattern(adType: 0x03, content: [0x0D, 0x18]),
        Pattern(adType: 0x16, content: [0x0D, 0x18]),
      ])
  }

  @Test func a32BitServiceUsesThe32BitTypes() {
    let options = ScanOptions(services: [BluetoothUUID(uint32: 0x1234_5678)], mode: .passive)
    #expect(options.monitorPatterns.map(\.adType) == [0x04, 0x05, 0x20])
    #expect(options.monitorPatterns.allSatisfy { $0.content == [0x78, 0x56, 0x34, 0x12] })
  }

  @Test func a128BitServiceUsesThe128BitTypesInAdvertisingByteOrder() throws {
    let uuid = try BluetoothUUID("b5b2a3c4-7f1e-4c55-9d5e-7a0c1f2e3d41")
    let options = ScanOptions(services: [uuid], mode: .passive)
    #expect(options.monitorPatterns.map(\.adType) == [0x06, 0x07, 0x21])
    let content = options.monitorPatterns[0].content
    #expect(content.count == 16)
    #expect(content.first == 0x41 && content.last == 0xB5)
  }

  @Test func companiesComeBeforeServices() {
    let options = ScanOptions(
      services: [BluetoothUUID(uint16: 0x180F)], manufacturerIDs: [0x0001], mode: .passive)
    #expect(options.monitorPatterns.map(\.adType) == [0xFF, 0x02, 0x03, 0x16])
  }

  @Test func withoutFiltersTheFlagsValuesInUseMatch() {
    let patterns = ScanOptions(mode: .passive).monitorPatterns
    #expect(patterns.count == 16)
    #expect(patterns.allSatisfy { $0.adType == 0x01 && $0.startPosition == 0 })
    let values = patterns.map { $0.content }
    #expect(values.contains([0x06]) && values.contains([0x02]) && values.contains([0x1A]))
    #expect(!values.contains([0x08]) && !values.contains([0x10]))
  }

  @Test func moreThanSevenPatternsAreSpreadOverSeveralMonitors() {
    let services = (0..<6).map { BluetoothUUID(uint16: 0x1800 + UInt16($0)) }
    let options = ScanOptions(services: services, rssi: .none, mode: .passive)
    let monitors = options.advertisementMonitors
    #expect(monitors.map(\.patterns.count) == [7, 7, 4])
    #expect(monitors.flatMap(\.patterns) == options.monitorPatterns)
    #expect(ScanOptions(mode: .passive).advertisementMonitors.map(\.patterns.count) == [7, 7, 2])
    #expect(ScanOptions(manufacturerIDs: [1], mode: .passive).advertisementMonitors.count == 1)
  }

  @Test func aServiceFilterMatchedByBluetoothdAlsoCarriesTheFlagsPatterns() throws {
    // BlueZ 5.69+ matches service patterns against nothing useful when it matches itself
    // (bluez/bluez#652): the flags patterns let the scan's own filter decide.
    let service = BluetoothUUID(uint16: 0x180D)
    let options = ScanOptions(
      services: [service], rssi: try RSSIFilter(minimum: -70), mode: .passive)
    let flags = ScanOptions(mode: .passive).monitorPatterns
    let bySoftware = options.advertisementMonitors(matchedByBluetoothd: true)
    #expect(bySoftware.flatMap(\.patterns) == options.monitorPatterns + flags)
    #expect(bySoftware.map(\.patterns.count) == [7, 7, 5])
    #expect(bySoftware.allSatisfy { $0.rssiHighThreshold == -70 })
    // A controller that matches the raw advertisement gets the service's patterns only.
    #expect(
      options.advertisementMonitors(matchedByBluetoothd: false).flatMap(\.patterns)
        == options.monitorPatterns)
    // Without a service filter nothing changes.
    let company = ScanOptions(manufacturerIDs: [0xFFFF], mode: .passive)
    #expect(
      company.advertisementMonitors(matchedByBluetoothd: true).flatMap(\.patterns)
        == company.monitorPatterns)
  }

  @Test func everyMonitorCarriesTheRSSISettings() throws {
    let services = (0..<6).map { BluetoothUUID(uint16: 0x1800 + UInt16($0)) }
    let options = ScanOptions(
      services: services, rssi: try RSSIFilter(minimum: -60), mode: .passive)
    #expect(options.advertisementMonitors.allSatisfy { $0.rssiHighThreshold == -60 })
  }

  @Test func noRSSIFieldsUnlessAsked() {
    let monitor = ScanOptions(mode: .passive).advertisementMonitor
    #expect(monitor.rssiHighThreshold == nil && monitor.rssiLowThreshold == nil)
    #expect(monitor.rssiLowTimeout == nil && monitor.rssiSamplingPeriod == nil)
  }

  @Test func anRSSIMinimumBecomesBothThresholds() throws {
    let options = ScanOptions(
      rssi: try RSSIFilter(minimum: -70), mode: .passive(lostAfter: .seconds(12)))
    let monitor = options.advertisementMonitor
    #expect(monitor.rssiHighThreshold == -70)
    #expect(monitor.rssiLowThreshold == -70)
    #expect(monitor.rssiHighTimeout == 1)
    #expect(monitor.rssiLowTimeout == 12)
  }

  @Test func lostAfterAloneCountsAnyRSSIAndIsClampedToBlueZsRange() {
    let long = ScanOptions(mode: .passive(lostAfter: .seconds(1000))).advertisementMonitor
    #expect(long.rssiLowThreshold == -127)
    #expect(long.rssiLowTimeout == 300)
    let short = ScanOptions(mode: .passive(lostAfter: .milliseconds(10))).advertisementMonitor
    #expect(short.rssiLowTimeout == 1)
  }

  @Test func duplicatesAskForEveryAdvertisementWhenThresholdsAreSet() throws {
    let options = ScanOptions(
      allowDuplicates: true, rssi: try RSSIFilter(minimum: -90), mode: .passive)
    #expect(options.advertisementMonitor.rssiSamplingPeriod == 0)
  }

  @Test func theMonitorIsExportedAsOrPatternsWithTheirDBusTypes() {
    let monitor = ScanOptions(manufacturerIDs: [0xFFFF], mode: .passive).advertisementMonitor
    let table = Dictionary(
      uniqueKeysWithValues: monitor.propertyTable.map { ($0.name, $0.value) })
    #expect(table["Type"] == .string("or_patterns"))
    #expect(
      table["Patterns"]
        == .array(
          element: "(yyay)",
          [.structure([.byte(0), .byte(0xFF), .bytes([0xFF, 0xFF])])]))
    #expect(table["RSSIHighThreshold"] == nil)
    #expect(monitor.propertyTable.first { $0.name == "Patterns" }?.signature == "a(yyay)")
  }
}
