import BlueZ
import Bluetooth
import DBus
import Testing

// The central side's pure logic: property tables, discovery filters, retry policy, flags.
@testable import BLEKit

@Suite struct CentralLogicTests {
  @Test func propertyRowsDecodeByType() {
    #expect(Device1.rssi.decode(.int16(-42)) == -42)
    #expect(Device1.rssi.decode(.variant(.int16(-42))) == -42)
    #expect(Device1.rssi.decode(.string("-42")) == nil)  // wrong D-Bus type: nil, not a trap
    let manufacturer = DBusValue.dictionary(
      key: "q", value: "v",
      [
        DBusDictEntry(key: .uint16(0x004C), value: .variant(.bytes([1, 2]))),
        DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([]))),
      ])
    #expect(Device1.manufacturerData.decode(manufacturer) == [0x004C: [1, 2], 0xFFFF: []])
    #expect(Device1.address.isRequired && !Device1.name.isRequired)
    #expect(Set(Device1.propertyTable.map(\.name)).count == Device1.propertyTable.count)
    #expect(GattCharacteristic1.propertyTable.contains { $0.name == "MTU" })
  }

  /// A Device1 property dictionary as bluetoothd sends it for an advertiser.
  static let advertiser: [String: DBusValue] = [
    "Address": .string("00:AA:01:01:00:01"), "AddressType": .string("public"),
    "Name": .string("bench"), "Alias": .string("bench"),
    "Adapter": .objectPath("/org/bluez/hci0"), "RSSI": .int16(-60), "TxPower": .int16(4),
    "UUIDs": .array(element: "s", [.string("e20a39f4-73f5-4bc4-a12f-17d1ad07a961")]),
    "ManufacturerData": .dictionary(
      key: "q", value: "v", [DBusDictEntry(key: .uint16(0xFFFF), value: .variant(.bytes([2])))]),
    "ServiceData": .dictionary(
      key: "s", value: "v",
      [DBusDictEntry(key: .string("0000180f-0000-1000-8000-00805f9b34fb"), value: .bytes([9]))]),
    "Connected": .bool(false), "Paired": .bool(false), "Trusted": .bool(false),
    "Blocked": .bool(false), "LegacyPairing": .bool(false), "ServicesResolved": .bool(false),
  ]

  @Test func deviceAdvertisementReadsWhatTheProxyReads() throws {
    let path = ObjectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01")
    // Each case: the dictionary, and whether the proxy accepts it.
    var cases: [([String: DBusValue], Bool)] = [(Self.advertiser, true)]
    for required in ["Address", "Adapter", "Connected"] {
      var missing = Self.advertiser
      missing[required] = nil
      var illTyped = Self.advertiser
      illTyped[required] = .uint32(7)
      cases += [(missing, false), (illTyped, false)]
    }
    for optional in ["AddressType", "Name", "RSSI", "TxPower", "UUIDs", "ManufacturerData"] {
      var illTyped = Self.advertiser
      illTyped[optional] = .uint32(7)
      var missing = Self.advertiser
      missing[optional] = nil
      cases += [(illTyped, true), (missing, true)]
    }
    var badEntry = Self.advertiser  // one malformed entry spoils the whole map, as for the proxy
    badEntry["ServiceData"] = .dictionary(
      key: "s", value: "v", [DBusDictEntry(key: .string("180f"), value: .string("x"))])
    cases.append((badEntry, true))
    let bus = try ClientTestBus()  // the proxies need a connection; nothing is sent on it
    defer { bus.stop() }
    let connection = try bus.connect()
    for (properties, accepted) in cases {
      let proxy = try? Device1.make(path: path, properties: properties, connection: connection)
      let advertised = DeviceAdvertisement(properties)
      #expect((proxy != nil) == accepted)
      #expect((advertised != nil) == accepted)
      guard let proxy, let advertised else { continue }
      #expect(advertised.address == proxy[Device1.address])
      #expect(advertised.addressType == proxy[Device1.addressType])
      #expect(advertised.name == proxy[Device1.name])
      #expect(advertised.adapter == proxy[Device1.adapter])
      #expect(advertised.rssi == proxy[Device1.rssi])
      #expect(advertised.txPower == proxy[Device1.txPower])
      #expect(advertised.uuids == proxy[Device1.uuids])
      #expect(advertised.manufacturerData == proxy[Device1.manufacturerData])
      #expect(advertised.serviceData == proxy[Device1.serviceData])
      #expect(advertised.connected == proxy[Device1.connected])
    }
  }

  @Test func propertyChangesAreTyped() {
    let changes = PropertyChanges<Device1>(
      changed: ["Connected": .bool(true), "RSSI": .string("oops"), "Frobnicate": .bool(true)],
      invalidated: ["Name"])
    guard case .changed(true)? = changes[Device1.connected] else {
      Issue.record("Connected not decoded")
      return
    }
    guard case .removed? = changes[Device1.rssi] else {
      Issue.record("an ill-typed value must read as removed")
      return
    }
    guard case .removed? = changes[Device1.name] else {
      Issue.record("an invalidated property must read as removed")
      return
    }
    #expect(changes[Device1.txPower] == nil)
    #expect(!changes.contains(Device1.txPower))
    #expect(changes.unknownNames == ["Frobnicate"])
  }

  @Test func discoveryFilterCarriesEveryField() throws {
    let options = ScanOptions(
      services: [BlekitUUID.transferService], allowDuplicates: true,
      rssi: try RSSIFilter(minimum: -50))
    let filter = try #require(
      DiscoveryFilter(
        uuids: options.services.map(\.uuidString), rssi: -50, transport: "le",
        duplicateData: true
      ).dbusValue.stringVariantDictionary)
    #expect(filter["Transport"] == .string("le"))
    #expect(filter["RSSI"] == .int16(-50))
    #expect(filter["DuplicateData"] == .bool(true))
    #expect(filter["UUIDs"]?.stringArrayValue == ["e20a39f4-73f5-4bc4-a12f-17d1ad07a961"])
    let empty = try #require(DiscoveryFilter().dbusValue.stringVariantDictionary)
    #expect(empty["UUIDs"] == nil && empty["RSSI"] == nil && empty["DuplicateData"] == nil)
  }

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

  @Test func remoteFlagsBecomeProperties() {
    let properties = CharacteristicProperties(
      remoteFlags: ["encrypt-read", "write-without-response", "notify", "unknown-flag"])
    #expect(properties == [.read, .writeWithoutResponse, .notify])
  }

  @Test func adapterChoice() {
    let paths: [ObjectPath] = ["/org/bluez/hci1", "/org/bluez/hci0"]
    #expect(CentralManager.chooseAdapter(nil, among: paths) == "/org/bluez/hci0")
    #expect(CentralManager.chooseAdapter("hci1", among: paths) == "/org/bluez/hci1")
    #expect(CentralManager.chooseAdapter("hci7", among: paths) == nil)
    #expect(CentralManager.chooseAdapter(nil, among: ["/org/bluez/hci2"]) == "/org/bluez/hci2")
    #expect(CentralManager.chooseAdapter(nil, among: []) == nil)
  }

  @Test func onlyPoweredChangesOfAnAdapterConcernTheState() {
    let adapter: ObjectPath = "/org/bluez/hci0"
    func changed(
      _ interface: InterfaceName, _ changed: [String: DBusValue], invalidated: [String] = []
    )
      -> BlueZObjectEvent
    {
      .propertiesChanged(
        adapter, interface, changed: changed, invalidated: invalidated, current: [:])
    }
    #expect(changed(Adapter1.interface, ["Powered": .bool(false)]).concernsCentralState)
    #expect(changed(Adapter1.interface, [:], invalidated: ["Powered"]).concernsCentralState)
    #expect(!changed(Adapter1.interface, ["Discovering": .bool(true)]).concernsCentralState)
    #expect(!changed(Device1.interface, ["Powered": .bool(true)]).concernsCentralState)
    #expect(
      BlueZObjectEvent.interfacesAdded(adapter, [Adapter1.interface: [:]]).concernsCentralState)
    #expect(BlueZObjectEvent.interfacesRemoved(adapter, [Adapter1.interface]).concernsCentralState)
    #expect(!BlueZObjectEvent.interfacesRemoved(adapter, [Device1.interface]).concernsCentralState)
    #expect(BlueZObjectEvent.serviceStopped.concernsCentralState)
  }
}
