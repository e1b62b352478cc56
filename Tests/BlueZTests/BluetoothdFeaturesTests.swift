// bluetoothd's release, read by running its program with --version, and what each release
// does where nothing on D-Bus tells: notify sockets per device (5.69) reaching that device only
// (5.76), indication confirmations on the socket (5.80), [GATT] Channels' default (5.67).
import Foundation
import Testing

@testable import BlueZ

@Suite(.serialized) struct BluetoothdFeaturesTests {
  @Test(
    arguments: [
      ("5.82\n", BluetoothdVersion(5, 82)), ("5.66", BluetoothdVersion(5, 66)),
      ("5.8\n", BluetoothdVersion(5, 8)), ("5.82.1\n", BluetoothdVersion(5, 82)),
      (" 5.72 \n", BluetoothdVersion(5, 72)), ("5.66-1+deb12u2\n", BluetoothdVersion(5, 66)),
    ] as [(String, BluetoothdVersion)])
  func versionIsParsedFromTheFirstLine(text: String, version: BluetoothdVersion) {
    #expect(BluetoothdVersion(parsing: text) == version)
  }

  @Test(arguments: ["", "bluetoothd", "5", "x.y", "5.82abc", "5.", ".82", "Usage: -v\n5.82"])
  func anythingElseIsNoVersion(text: String) {
    #expect(BluetoothdVersion(parsing: text) == nil)
  }

  @Test func releasesCompareByNumberNotText() {
    #expect(BluetoothdVersion(5, 8) < BluetoothdVersion(5, 66))
    #expect(BluetoothdVersion(5, 100) > BluetoothdVersion(5, 82))
  }

  /// (version, sockets, confirmations, default Channels, largest Channels, clamps)
  @Test(
    arguments: [
      (BluetoothdVersion(5, 66), .shared, .confirmMethod, 3, 5, true),
      (BluetoothdVersion(5, 67), .shared, .confirmMethod, 1, 6, false),
      (BluetoothdVersion(5, 68), .shared, .confirmMethod, 1, 6, false),
      (BluetoothdVersion(5, 69), .perDeviceToAll, .confirmMethod, 1, 6, false),
      (BluetoothdVersion(5, 72), .perDeviceToAll, .confirmMethod, 1, 6, false),
      (BluetoothdVersion(5, 75), .perDeviceToAll, .confirmMethod, 1, 6, false),
      (
        BluetoothdVersion(5, 76), .perDevice, BluetoothdFeatures.SocketConfirmations.none, 1, 6,
        false
      ),
      (
        BluetoothdVersion(5, 79), .perDevice, BluetoothdFeatures.SocketConfirmations.none, 1, 6,
        false
      ),
      (BluetoothdVersion(5, 80), .perDevice, .socketByte, 1, 6, false),
      (BluetoothdVersion(5, 82), .perDevice, .socketByte, 1, 6, false),
      (nil, .shared, .confirmMethod, 3, 5, true),
    ]
      as [(
        BluetoothdVersion?, BluetoothdFeatures.NotifySockets,
        BluetoothdFeatures.SocketConfirmations, Int, Int, Bool
      )])
  func eachReleaseHasItsRules(
    version: BluetoothdVersion?, sockets: BluetoothdFeatures.NotifySockets,
    confirmations: BluetoothdFeatures.SocketConfirmations, channels: Int, largest: Int,
    clamps: Bool
  ) {
    let features = BluetoothdFeatures(version: version)
    #expect(features.notifySockets == sockets)
    #expect(features.socketConfirmations == confirmations)
    #expect(features.defaultGATTChannels == channels)
    #expect(features.maximumGATTChannels == largest)
    #expect(features.clampsGATTChannels == clamps)
  }

  @Test func onlyAProgramCalledBluetoothdIsEverRun() {
    #expect(BluetoothdVersion.isBluetoothd("/usr/libexec/bluetooth/bluetoothd"))
    #expect(BluetoothdVersion.isBluetoothd("/usr/sbin/bluetoothd"))
    #expect(!BluetoothdVersion.isBluetoothd("bluetoothd"))
    #expect(!BluetoothdVersion.isBluetoothd("/usr/bin/python3"))
    #expect(!BluetoothdVersion.isBluetoothd("/tmp/bluetoothd-helper"))
    // This test process owns no org.bluez, and is not bluetoothd: never run.
    #expect(BluetoothdVersion.program(ofProcess: UInt32(getpid())) == nil)
  }

  /// A stand-in program called bluetoothd in a fresh directory, running `script`.
  private func standIn(_ script: String) throws -> String {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("bluetoothd-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let program = directory.appendingPathComponent("bluetoothd").path
    // Written through a close-on-exec descriptor: a child spawned meanwhile by another test
    // (dbus-daemon) must not inherit it open for writing, or exec fails with ETXTBSY.
    let fd = open(program, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
    #expect(fd >= 0)
    let bytes = Array("#!/bin/sh\n\(script)\n".utf8)
    #expect(write(fd, bytes, bytes.count) == bytes.count)
    close(fd)
    return program
  }

  @Test func theProgramsAnswerToVersionIsRead() async throws {
    #expect(
      await BluetoothdVersion.probe(program: try standIn("echo 5.82")) == BluetoothdVersion(5, 82))
    // It got --version, nothing else, and no environment.
    let checks = try standIn(
      #"[ "$1" = --version ] && [ $# -eq 1 ] && [ -z "$HOME" ] && echo 5.80"#)
    #expect(await BluetoothdVersion.probe(program: checks) == BluetoothdVersion(5, 80))
    #expect(await BluetoothdVersion.probe(program: try standIn("echo 5.82; exit 1")) == nil)
    #expect(await BluetoothdVersion.probe(program: try standIn("echo usage")) == nil)
    #expect(await BluetoothdVersion.probe(program: "/nonexistent/bluetoothd") == nil)
  }

  @Test func aProgramThatHangsIsKilledAfterTheLimit() async throws {
    let start = ContinuousClock.now
    #expect(await BluetoothdVersion.probe(program: try standIn("exec sleep 30")) == nil)
    #expect(ContinuousClock.now - start < .seconds(5))
  }

  @Test func theInstalledBluetoothdAnswers() async throws {
    let installed = "/usr/libexec/bluetooth/bluetoothd"
    guard FileManager.default.isExecutableFile(atPath: installed) else { return }
    let version = try #require(await BluetoothdVersion.probe(program: installed))
    #expect(version >= BluetoothdVersion(5, 66))
  }
}
