// The GATT commands' argument checks and output formats: values in hex, text and raw; the
// explore tree as text and JSON; the adapters table; exit statuses.

import ArgumentParsing
import BlueZ
import Foundation
import JSON
import Testing

@testable import BLEKit
@testable import Bluetooth
@testable import DBus
@testable import blekit

@Suite struct ValueRenderingTests {
  @Test func hexTextAndRawRendering() {
    let value: [UInt8] = [0x68, 0x69, 0x00, 0xFF]
    #expect(ValueFormat.hex.render(value) == Array("686900ff\n".utf8))
    #expect(ValueFormat.raw.render(value) == value)
    #expect(ValueFormat.text.render(Array("pong".utf8)) == Array("pong\n".utf8))
    // Invalid UTF-8 is replaced, never dropped silently.
    #expect(ValueFormat.text.render([0xFF]) == Array("\u{FFFD}\n".utf8))
    #expect(ValueFormat.hex.render([]) == [0x0A])
    #expect(ValueFormat.raw.render([]) == [])
  }

  @Test func formatFlagsExcludeEachOther() throws {
    #expect(try ValueFormat.from(text: false, raw: false) == .hex)
    #expect(try ValueFormat.from(text: true, raw: false) == .text)
    #expect(try ValueFormat.from(text: false, raw: true) == .raw)
    #expect(throws: UsageError.self) { try ValueFormat.from(text: true, raw: true) }
  }

  @Test func printableTextAcceptsTextAndCStrings() {
    #expect(printableText(Array("BlueZ 5.66".utf8)) == "BlueZ 5.66")
    #expect(printableText(Array("name".utf8) + [0, 0]) == "name")
    #expect(printableText(Array("héllo ✓".utf8)) == "héllo ✓")
  }

  @Test func printableTextRefusesBinary() {
    #expect(printableText([]) == nil)
    #expect(printableText([0, 0]) == nil)
    #expect(printableText([0x01]) == nil)
    #expect(printableText([0x6F, 0x75, 0x5D, 0x92]) == nil)  // not UTF-8
    #expect(printableText([0x61, 0x00, 0x62]) == nil)  // NUL inside
    #expect(printableText(Array("a\u{1B}[2J".utf8)) == nil)  // terminal escape
    #expect(printableText([0x68, 0x09]) == nil)  // 24.08 degrees C, not "h\t"
  }

  @Test func threeDecimalsPadsTheFraction() {
    #expect(threeDecimals(1.5) == "1.500")
    #expect(threeDecimals(0.0424) == "0.042")
    #expect(threeDecimals(12.0) == "12.000")
  }
}

@Suite struct GattArgumentTests {
  static let address = "00:AA:01:01:00:01"

  @Test func targetsAreAddressesOrNames() throws {
    #expect(
      try parsePeripheralTarget("00:aa:01:01:00:01") == .address(try BluetoothAddress(Self.address))
    )
    #expect(try parsePeripheralTarget("blekit-peer") == .name("blekit-peer"))
    #expect(try parsePeripheralTarget("My Sensor") == .name("My Sensor"))
    // A colon among non-hex characters is a name, not a broken address.
    #expect(try parsePeripheralTarget("Room: kitchen") == .name("Room: kitchen"))
  }

  @Test func malformedAddressesAreUsageErrors() {
    for text in ["00:AA:01:01:00", "00:AA:01:01:00:01:02", "0:AA:01:01:00:01", ""] {
      #expect(throws: UsageError.self, "\(text)") { try parsePeripheralTarget(text) }
    }
  }

  @Test func readParsesAndValidates() throws {
    let command = try ReadCommand.parse([Self.address, "2a00", "--text", "-a", "hci1"])
    #expect(command.characteristic == BluetoothUUID(uint16: 0x2A00))
    #expect(command.format == .text)
    #expect(command.adapter == "hci1")
    #expect(command.timeout == .seconds(20))
    #expect(throws: UsageError.self) { try ReadCommand.parse([Self.address, "2a0"]) }
    #expect(throws: UsageError.self) { try ReadCommand.parse([Self.address, "2a00", "-t", "0"]) }
    #expect(throws: UsageError.self) {
      try ReadCommand.parse([Self.address, "2a00", "--service", "xyz"])
    }
  }

  @Test func writeTakesHexOrTextButNotBoth() throws {
    let hex = try WriteCommand.parse([Self.address, "2b29", "01:02 ff"])
    #expect(hex.value == [0x01, 0x02, 0xFF])
    #expect(hex.type == .withResponse)
    let text = try WriteCommand.parse(
      [
        Self.address, "08590f7e-db05-467e-8757-72f6faeb13d4", "--text", "pong",
        "--without-response",
      ])
    #expect(text.value == Array("pong".utf8))
    #expect(text.type == .withoutResponse)
    #expect(throws: UsageError.self) { try WriteCommand.parse([Self.address, "2b29"]) }
    #expect(throws: UsageError.self) {
      try WriteCommand.parse([Self.address, "2b29", "01", "--text", "x"])
    }
    #expect(throws: UsageError.self) { try WriteCommand.parse([Self.address, "2b29", "0g"]) }
    let longest = String(repeating: "ab", count: 512)
    #expect(try WriteCommand.parse([Self.address, "2b29", longest]).value?.count == 512)
    #expect(throws: UsageError.self) {
      try WriteCommand.parse([Self.address, "2b29", longest + "ab"])
    }
  }

  @Test func writeStdinTakesNoValueAndNoDescriptor() throws {
    let streamed = try WriteCommand.parse(
      [Self.address, "6e400002-b5a3-f393-e0a9-e50e24dcca9e", "--stdin", "--without-response"])
    #expect(streamed.value == nil)
    #expect(streamed.type == .withoutResponse)
    #expect(try WriteCommand.parse([Self.address, "2b29", "--stdin"]).type == .withResponse)
    for extra in [["01"], ["--text", "x"], ["--descriptor", "2901"]] {
      #expect(throws: UsageError.self, "\(extra)") {
        try WriteCommand.parse([Self.address, "2b29", "--stdin"] + extra)
      }
    }
  }

  @Test func notifyChecksCountAndDuration() throws {
    let command = try NotifyCommand.parse([Self.address, "2a37", "-n", "3", "--duration", "2s"])
    #expect(command.count == 3)
    #expect(command.duration == .seconds(2))
    #expect(throws: UsageError.self) { try NotifyCommand.parse([Self.address, "2a37", "-n", "0"]) }
    #expect(throws: UsageError.self) {
      try NotifyCommand.parse([Self.address, "2a37", "--duration", "0"])
    }
  }

  @Test func exploreAndAdaptersOptions() throws {
    let explore = try ExploreCommand.parse(["blekit-peer", "--listen", "5", "--json", "--refresh"])
    #expect(explore.target == .name("blekit-peer"))
    #expect(explore.listen == .seconds(5))
    #expect(explore.json && explore.refresh)
    #expect(throws: UsageError.self) { try ExploreCommand.parse([Self.address, "--listen", "0"]) }
    #expect(try AdaptersCommand.parse(["--power", "off", "-a", "hci1"]).power == .off)
    #expect(throws: UsageError.self) { try AdaptersCommand.parse(["--power", "maybe"]) }
  }

  @Test func errorsMapToDistinctStatuses() {
    func status(_ error: any Error) -> ArgumentParsing.ExitStatus {
      ErrorReport(exitError(error)).status
    }
    #expect(status(BluetoothError(.attributeNotFound, "gone")) == .notFound)
    #expect(status(BluetoothError(.notSupported, "no notify")) == .notSupported)
    #expect(status(BluetoothError(.timeout, "not seen")) == .timedOut)
    #expect(status(BluetoothError(.adapterNotFound, "hci7")) == .adapterNotFound)
    #expect(status(BluetoothError(.serviceUnavailable, "down")) == .bluetoothUnavailable)
    #expect(status(BluetoothError(.disconnected, "gone")) == .disconnected)
    // bluetoothd's refusals, as BLEKit wraps them.
    let refused = BluetoothError(BlueZError(.notPermitted, "Read not permitted"), while: "reading")
    #expect(refused.code == .notPermitted)
    #expect(status(refused) == .permissionDenied)
    let unauthorized = BluetoothError(BlueZError(.notAuthorized, "no"), while: "writing")
    #expect(status(unauthorized) == .permissionDenied)
    #expect(
      status(BluetoothError(BlueZError(.inProgress, "busy"), while: "reading")) == .remoteError)
    let statuses: [ArgumentParsing.ExitStatus] = [
      .usage, .adapterNotFound, .timedOut, .notFound, .notSupported, .permissionDenied,
    ]
    #expect(Set(statuses.map(\.rawValue)).count == statuses.count)
  }
}

@Suite struct ExploreOutputTests {
  static let device = ObjectPath(unchecked: "/org/bluez/hci0/dev_00_AA_01_01_00_01")

  /// A tree like the one `blekit advertise` serves, as bluetoothd exports it.
  static func tree() -> [ExploredService] {
    let service = RemoteService(
      uuid: BluetoothUUID(uint16: 0x1801), isPrimary: true,
      path: device.appending("service0008"))
    let hash = RemoteCharacteristic(
      uuid: BluetoothUUID(uint16: 0x2B2A), properties: [.read], flags: ["read"],
      service: service.path, path: service.path.appending("char000e"))
    let transferService = RemoteService(
      uuid: BlekitUUID.transferService, isPrimary: true, path: device.appending("service0015"))
    let transfer = RemoteCharacteristic(
      uuid: BlekitUUID.transferCharacteristic, properties: [.writeWithoutResponse, .notify],
      flags: ["write-without-response", "notify"], service: transferService.path,
      path: transferService.path.appending("char0016"))
    let cccd = RemoteDescriptor(
      uuid: BluetoothUUID(uint16: 0x2902), characteristic: transfer.path,
      path: transfer.path.appending("desc0018"))
    let long = RemoteCharacteristic(
      uuid: BluetoothUUID(uint16: 0x2A29), properties: [.read], flags: ["read"],
      service: transferService.path, path: transferService.path.appending("char001a"))
    return [
      ExploredService(
        service: service,
        characteristics: [
          ExploredCharacteristic(
            characteristic: hash,
            read: .value([0x6F, 0x75, 0x5D, 0x92, 0x74, 0xD5, 0x3B, 0xFB]), descriptors: [])
        ]),
      ExploredService(
        service: transferService,
        characteristics: [
          ExploredCharacteristic(
            characteristic: transfer,
            read: .failed(
              AttributeReadFailure(
                errorName: "org.bluez.Error.NotPermitted", message: "Read not permitted")),
            descriptors: [ExploredDescriptor(descriptor: cccd, read: .value([0, 0]))]),
          ExploredCharacteristic(
            characteristic: long, read: .value(Array("Lorem ipsum dolor sit amet".utf8)),
            descriptors: []),
        ]),
    ]
  }

  static let info = ExploreCommand.ExploredDevice(
    address: try! BluetoothAddress("00:AA:01:01:00:01"), name: "blekit-peer", adapter: "hci0",
    mtu: 517)

  /// A peer's name is anyone's: its bidi override, zero-width space and line separator reach
  /// a terminal escaped, in the text header and in --json, as fleet's payloads always were.
  @Test func namesWithFormatCharactersAreEscaped() throws {
    let device = ExploreCommand.ExploredDevice(
      address: try BluetoothAddress("00:AA:01:01:00:01"), name: "ab\u{202E}cd\u{200B}\u{2028}e",
      adapter: "hci0", mtu: nil)
    let head = ExploreCommand.text(device: device, tree: []).split(separator: "\n").first
    #expect(head == #"00:AA:01:01:00:01  "ab\u202ecd\u200b\u2028e"  via hci0"#)
    let json = ExploreCommand.json(device: device, tree: []).text
    #expect(json.contains(#""name":"ab\u202ecd\u200b\u2028e""#), "\(json)")
  }

  @Test func textShowsNamesValuesAndErrorsOnTheirOwnLines() {
    let lines = ExploreCommand.text(device: Self.info, tree: Self.tree())
      .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(
      lines == [
        "00:AA:01:01:00:01  \"blekit-peer\"  via hci0  MTU 517",
        "service 1801  Generic Attribute",
        "  characteristic 2b2a  Database Hash  [read]",
        "    value  6f 75 5d 92 74 d5 3b fb",
        "service e20a39f4-73f5-4bc4-a12f-17d1ad07a961  blekit Transfer Service",
        "  characteristic 08590f7e-db05-467e-8757-72f6faeb13d4  blekit Transfer Characteristic"
          + "  [write-without-response, notify]",
        "    error  Read not permitted (org.bluez.Error.NotPermitted)",
        "    descriptor 2902  Client Characteristic Configuration",
        "      value  00 00",
        "  characteristic 2a29  Manufacturer Name String  [read]",
        "    value  4c 6f 72 65 6d 20 69 70 73 75 6d 20 64 6f 6c 6f  (26 bytes)",
        "           72 20 73 69 74 20 61 6d 65 74",
        "    text   \"Lorem ipsum dolor sit amet\"",
      ])
  }

  @Test func shortTextValuesShareTheirLine() {
    #expect(
      ExploreCommand.valueLines(.value(Array("pong".utf8)), indent: "", address: Self.info.address)
        == ["value  70 6f 6e 67  \"pong\""])
    #expect(
      ExploreCommand.valueLines(.value([]), indent: "  ", address: Self.info.address) == [
        "  value  (empty)"
      ])
    #expect(ExploreCommand.valueLines(.notRead, indent: "", address: Self.info.address) == [])
  }

  @Test func valuesThatNeedPairingAreMarkedAndCounted() throws {
    let address = Self.info.address
    let notPaired = AttributeReadFailure(
      errorName: "org.bluez.Error.NotPermitted", message: "Not paired", droppedLink: true)
    #expect(
      ExploreCommand.valueLines(.failed(notPaired), indent: "    ", address: address) == [
        "    error  needs encryption: pair first (blekit pair 00:AA:01:01:00:01); the link "
          + "dropped (connected again); bluetoothd: Not paired (org.bluez.Error.NotPermitted)"
      ])
    let authorization = AttributeReadFailure(
      errorName: "org.bluez.Error.Failed", message: "Operation failed with ATT error: 0x08")
    #expect(
      ExploreCommand.failureText(authorization, address: address)
        .hasPrefix("needs the device's authorization"))
    let dropped = AttributeReadFailure(
      errorName: "org.bluez.Error.Failed", message: "Operation failed", droppedLink: true)
    #expect(
      ExploreCommand.failureText(dropped, address: address)
        .hasPrefix("the link dropped when reading it (it may need pairing"))
    // A plain refusal is the device's design, not something pairing changes.
    var tree = Self.tree()
    #expect(ExploreCommand.Unread(tree).failure(address: address) == nil)
    tree[1].characteristics[1].read = .failed(notPaired)
    tree[1].characteristics[0].descriptors[0].read = .failed(dropped)
    let unread = ExploreCommand.Unread(tree)
    #expect(
      unread.summary(address: address)
        == "2 values not read: 1 needs pairing first (blekit pair 00:AA:01:01:00:01), "
        + "1 dropped the link when read (may need pairing too)")
    #expect(unread.failure(address: address)?.exitStatus == .permissionDenied)
    tree[1].characteristics[1].read = .value([1])
    #expect(
      ExploreCommand.Unread(tree).failure(address: address)?.exitStatus == .permissionDenied)
    let lines = ExploreCommand.text(device: Self.info, tree: tree).split(separator: "\n")
    #expect(
      lines.last.map(String.init)
        == "1 value not read: 1 dropped the link when read (it may need pairing: blekit pair "
        + "00:AA:01:01:00:01)")
    let json = ExploreCommand.json(device: Self.info, tree: tree).text
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    #expect(object["unread"] as? Int == 1)
  }

  /// A readable characteristic whose read failed for no reason pairing changes is a value not
  /// read too: bluetoothd 5.82 answered InProgress while it raised the link's security, and a
  /// bonded reconnect left a read unanswered for 40 s; explore printed the rest and exited 0.
  @Test func readableValuesThatFailedAreCountedAndExitEight() throws {
    let address = Self.info.address
    var tree = Self.tree()
    // The transfer characteristic's NotPermitted: it has no read flag, so not counted.
    #expect(ExploreCommand.Unread(tree).failure(address: address) == nil)
    tree[1].characteristics[1].read = .failed(
      AttributeReadFailure(errorName: "org.bluez.Error.InProgress", message: "In Progress"))
    let unread = ExploreCommand.Unread(tree)
    #expect(
      unread.summary(address: address)
        == "1 value not read: 1 failed (the error is on its line)")
    #expect(unread.failure(address: address)?.exitStatus == .remoteError)
    // With a value that needs pairing as well, pairing is what to do first: exit 5.
    tree[0].characteristics[0].read = .failed(
      AttributeReadFailure(errorName: "org.bluez.Error.NotPermitted", message: "Not paired"))
    #expect(
      ExploreCommand.Unread(tree).failure(address: address)?.exitStatus == .permissionDenied)
    let json = ExploreCommand.json(device: Self.info, tree: tree).text
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    #expect(object["unread"] as? Int == 2)
  }

  @Test func jsonIsOneObjectWithTheWholeTree() throws {
    let text = ExploreCommand.json(device: Self.info, tree: Self.tree()).text
    #expect(!text.contains("\n"))
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    #expect(object["type"] as? String == "explore")
    #expect(object["address"] as? String == "00:AA:01:01:00:01")
    #expect(object["mtu"] as? Int == 517)
    let services = try #require(object["services"] as? [[String: Any]])
    #expect(
      services.map { $0["shortUUID"] as? String } == [
        "1801", BlekitUUID.transferService.uuidString,
      ])
    #expect(services[0]["name"] as? String == "Generic Attribute")
    let characteristics = try #require(services[1]["characteristics"] as? [[String: Any]])
    let transfer = characteristics[0]
    #expect(transfer["uuid"] as? String == BlekitUUID.transferCharacteristic.uuidString)
    #expect(transfer["flags"] as? [String] == ["write-without-response", "notify"])
    #expect(transfer["value"] is NSNull)
    let error = try #require(transfer["error"] as? [String: Any])
    #expect(error["name"] as? String == "org.bluez.Error.NotPermitted")
    #expect(error["message"] as? String == "Read not permitted")
    let descriptors = try #require(transfer["descriptors"] as? [[String: Any]])
    #expect(descriptors.count == 1)
    #expect(descriptors[0]["name"] as? String == "Client Characteristic Configuration")
    #expect(descriptors[0]["value"] as? String == "0000")
    #expect(descriptors[0]["text"] is NSNull)
    let long = characteristics[1]
    #expect(long["text"] as? String == "Lorem ipsum dolor sit amet")
    #expect((long["value"] as? String)?.count == 52)
    #expect(long["error"] is NSNull)
  }

  @Test func notificationsAsTextAndJSON() throws {
    let heard = ExploreCommand.Heard(
      seconds: 1.2345, service: BlekitUUID.transferService,
      characteristic: BlekitUUID.transferCharacteristic, value: Array("hello".utf8))
    #expect(
      ExploreCommand.notificationText(heard)
        == "notify  +1.235s  08590f7e-db05-467e-8757-72f6faeb13d4  blekit Transfer Characteristic"
        + "  68 65 6c 6c 6f  \"hello\"")
    let object = try #require(
      try JSONSerialization.jsonObject(
        with: Data(ExploreCommand.notificationJSON(heard).text.utf8)) as? [String: Any])
    #expect(object["type"] as? String == "notification")
    #expect(object["value"] as? String == "68656c6c6f")
    #expect(object["text"] as? String == "hello")
  }
}

@Suite struct AdapterTableTests {
  @Test func columnsAreAlignedAndTrailingSpaceTrimmed() {
    let table = alignedTable([
      ["NAME", "ADDRESS", "POWERED", "ALIAS"],
      ["hci0", "00:AA:01:00:00:00", "yes", ""],
      ["hci10", "00:AA:01:01:00:01", "no (off-blocked)", "lab"],
    ])
    #expect(
      table == """
        NAME   ADDRESS            POWERED           ALIAS
        hci0   00:AA:01:00:00:00  yes
        hci10  00:AA:01:01:00:01  no (off-blocked)  lab
        """)
  }
}

@Suite struct ReadErrorWordingTests {
  @Test func attributeNotLongIsExplained() throws {
    // As bluetoothd 5.66 answers a failed ReadValue: the ATT code only in the text.
    func failed(_ text: String) -> BluetoothError {
      BluetoothError(
        BlueZError(.failed, text, name: "org.bluez.Error.Failed"), while: "reading 2a00")
    }
    let error = failed("Operation failed with ATT error: 0x0b")
    #expect(error.attErrorCode == 0x0b)
    let explained = try #require(ReadCommand.explain(error, mtu: 185) as? CLIError)
    #expect(explained.exitStatus == .remoteError)
    #expect(explained.exitMessage.contains("Attribute Not Long"))
    #expect(explained.exitMessage.contains("184 bytes"))
    let other = ReadCommand.explain(failed("Operation failed with ATT error: 0x0e"), mtu: 185)
    #expect((other as? CLIError)?.exitMessage.contains("Attribute Not Long") == false)
    #expect((other as? CLIError)?.exitStatus == .remoteError)
    // The words alone, without bluetoothd's error under them, are not an ATT code.
    let words = BluetoothError(.bluez, "Operation failed with ATT error: 0x0b")
    #expect(words.attErrorCode == nil)
    #expect((ReadCommand.explain(words, mtu: 185) as? CLIError)?.exitMessage == words.message)
  }
}
