// Whether a plain peer's chunks arrive in order: every combination of the local bluetoothd's
// [GATT] Channels and the peer's Server Supported Features, and reading the local setting.
import BLEKit
import BlueZ
import Testing

@Suite struct TransferOrderTests {
  static let peers: [TransferOrder.PeerEATT] = [
    .supported, .notSupported, .unknown("read failed"),
  ]

  @Test(arguments: [1, 2, 3, 5, nil] as [Int?], peers)
  func plainOrderIsGuaranteedOnlyWithOneBearer(local: Int?, peer: TransferOrder.PeerEATT) {
    let order = TransferOrder.plain(localChannels: local, localSource: "test", peer: peer)
    let oneBearer = local == 1 || peer == .notSupported
    #expect(order.isGuaranteed == oneBearer, "local \(String(describing: local)), peer \(peer)")
    #expect(order.name == (oneBearer ? "guaranteed" : "not-guaranteed"))
  }

  @Test func reasonsNameTheFacts() {
    let local = TransferOrder.plain(
      localChannels: 1, localSource: "Channels = 1 in /run/lab/main.conf", peer: .supported)
    #expect(local.reason == "bluetoothd uses one ATT bearer (Channels = 1 in /run/lab/main.conf)")
    let eatt = TransferOrder.plain(
      localChannels: 3, localSource: "bluetoothd's default", peer: .supported)
    #expect(!eatt.isGuaranteed)
    #expect(eatt.reason.contains("3 ATT bearers") && eatt.reason.contains("the peer offers EATT"))
    let unknown = TransferOrder.plain(
      localChannels: nil, localSource: "unreadable", peer: .unknown("no 0x1801"))
    #expect(unknown.reason.contains("could not be read") && unknown.reason.contains("no 0x1801"))
    #expect(TransferOrder.sequenced.isGuaranteed && TransferOrder.sequenced.name == "sequenced")
  }

  @Test func serverSupportedFeaturesBitZeroIsEATT() {
    #expect(TransferOrder.PeerEATT(serverSupportedFeatures: [0x01]) == .supported)
    #expect(TransferOrder.PeerEATT(serverSupportedFeatures: [0x03, 0x00]) == .supported)
    #expect(TransferOrder.PeerEATT(serverSupportedFeatures: [0x00]) == .notSupported)
    #expect(TransferOrder.PeerEATT(serverSupportedFeatures: [0xFE]) == .notSupported)
    #expect(TransferOrder.PeerEATT(serverSupportedFeatures: nil) == .notSupported)
    guard case .unknown = TransferOrder.PeerEATT(serverSupportedFeatures: []) else {
      Issue.record("an empty value must not count as known")
      return
    }
  }
}

@Suite struct BluetoothdConfigurationTests {
  @Test(
    arguments: [
      ([], "/etc/bluetooth/main.conf"),
      (["/usr/libexec/bluetooth/bluetoothd", "-n", "-d"], "/etc/bluetooth/main.conf"),
      (["bluetoothd", "-n", "-d", "-f", "/run/lab/main.conf"], "/run/lab/main.conf"),
      (["bluetoothd", "-f/tmp/a.conf"], "/tmp/a.conf"),
      (["bluetoothd", "--configfile", "/tmp/b.conf", "-E"], "/tmp/b.conf"),
      (["bluetoothd", "--configfile=/tmp/c.conf"], "/tmp/c.conf"),
      (["bluetoothd", "-f", "/tmp/first", "-f", "/tmp/last"], "/tmp/last"),
      (["bluetoothd", "-f"], "/etc/bluetooth/main.conf"),
    ] as [([String], String)])
  func configurationPathFollowsTheCommandLine(arguments: [String], path: String) {
    #expect(BluetoothdConfiguration.configurationPath(arguments: arguments) == path)
  }

  @Test(
    arguments: [
      ("[GATT]\nChannels = 1\n", 1),
      ("[General]\nName = x\n\n[GATT]\n# comment\nExchangeMTU = 100\nChannels=2\n", 2),
      ("[GATT]\n  Channels =   5  \n", 5),
      ("[GATT]\nChannels = 9\n", 5),
      ("[GATT]\nChannels = 0\n", 1),
      ("[GATT]\nChannels = 1\nChannels = 3\n", 3),
      ("[GATT]\r\nChannels = 1\r\n", 1),
    ] as [(String, Int)])
  func channelsAreReadAndClampedAsBluetoothdDoes(text: String, channels: Int) {
    let configuration = BluetoothdConfiguration.parse(mainConf: text, path: "/x/main.conf")
    #expect(configuration.gattChannels == channels)
    #expect(configuration.source == "Channels = \(channels) in /x/main.conf")
  }

  @Test(arguments: [
    "", "[General]\nChannels = 1\n", "[GATT]\n#Channels = 1\n", "[GATT]\nChannels = one\n",
    "[GATT]\nchannels = 1\n",
  ])
  func withoutAValidChannelsTheDefaultIsThree(text: String) {
    let configuration = BluetoothdConfiguration.parse(mainConf: text, path: "/x/main.conf")
    #expect(configuration.gattChannels == 3)
    #expect(configuration.source.hasPrefix("bluetoothd's default"))
  }
}

/// What `[GATT] Channels` means per release (src/main.c): 5.66 defaults to 3 and clamps to
/// 1...5; 5.67 and later default to 1 and ignore a value outside 1...6.
@Suite struct ChannelsPerReleaseTests {
  static let bookworm = BluetoothdFeatures(version: BluetoothdVersion(5, 66))
  static let trixie = BluetoothdFeatures(version: BluetoothdVersion(5, 82))

  @Test func stockTrixieDefaultsToOneBearerSoPlainChunksAreInOrder() {
    let configuration = BluetoothdConfiguration.parse(
      mainConf: "[GATT]\n#Channels = 1\n", path: "/etc/bluetooth/main.conf", features: Self.trixie)
    #expect(configuration.gattChannels == 1)
    #expect(
      configuration.source
        == "bluetoothd 5.82's default (no Channels in /etc/bluetooth/main.conf)")
    let order = TransferOrder.plain(
      localChannels: configuration.gattChannels, localSource: configuration.source,
      peer: .supported)
    #expect(order.isGuaranteed)
  }

  @Test func stockBookwormStillDefaultsToThreeAndRefuses() {
    let configuration = BluetoothdConfiguration.parse(
      mainConf: "[GATT]\n#Channels = 3\n", path: "/etc/bluetooth/main.conf",
      features: Self.bookworm)
    #expect(configuration.gattChannels == 3)
    #expect(configuration.source.hasPrefix("bluetoothd 5.66's default"))
    let order = TransferOrder.plain(
      localChannels: configuration.gattChannels, localSource: configuration.source,
      peer: .supported)
    #expect(!order.isGuaranteed)
  }

  @Test(
    arguments: [
      ("[GATT]\nChannels = 9\n", 5, 1), ("[GATT]\nChannels = 0\n", 1, 1),
      ("[GATT]\nChannels = 6\n", 5, 6), ("[GATT]\nChannels = 2\n", 2, 2),
      ("[GATT]\nChannels = two\n", 3, 1),
    ] as [(String, Int, Int)])
  func outOfRangeIsClampedBy566AndIgnoredBy582(text: String, old: Int, new: Int) {
    #expect(
      BluetoothdConfiguration.parse(mainConf: text, path: "/x", features: Self.bookworm)
        .gattChannels == old)
    let trixie = BluetoothdConfiguration.parse(mainConf: text, path: "/x", features: Self.trixie)
    #expect(trixie.gattChannels == new)
    if text.contains("9") {
      #expect(trixie.source == "bluetoothd 5.82's default (Channels = 9 is out of 1...6 in /x)")
    }
  }
}
