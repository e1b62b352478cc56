// MonitorTarget: how a report reads as a sighting, a malformed payload or nothing, for
// short, long and garbage manufacturer data.

import BLEKit
import Testing

@testable import Sightings

@Suite struct MonitorTargetTests {
  let folkBears = MonitorTarget.manufacturer(companyID: 0xFFFF, layout: .folkbears)
  let id = (1...16).map(UInt8.init)

  func read(_ target: MonitorTarget, _ data: [UInt16: [UInt8]], uuids: [BluetoothUUID] = [])
    -> MonitorReading
  {
    target.read(address: "00:AA:01:01:00:01", serviceUUIDs: uuids, manufacturerData: data)
  }

  @Test func decodesATempUserID() {
    #expect(
      read(folkBears, [0xFFFF: [0x02, 0x10] + id])
        == .sighting(id: "0102030405060708090a0b0c0d0e0f10"))
  }

  @Test func otherCompaniesAreNotTheTarget() {
    #expect(read(folkBears, [0x004C: [0x02, 0x10] + id]) == .notTarget)
    #expect(read(folkBears, [:]) == .notTarget)
  }

  @Test(arguments: [
    ([UInt8](), MalformedPayload.Reason.empty),
    ([0x02], .tooShort),
    ([0x02, 0x10, 0x01], .tooShort),
    ([0x02, 0x10] + Array(repeating: 0xAB, count: 17), .trailingBytes),
    ([0x03, 0x10] + Array(repeating: 0xAB, count: 16), .wrongType),
    ([0x02, 0x0F] + Array(repeating: 0xAB, count: 16), .wrongLength),
    ([0xFF], .wrongType),
  ])
  func malformedPayloadsAreNamed(bytes: [UInt8], reason: MalformedPayload.Reason) {
    guard case .malformed(let payload) = read(folkBears, [0xFFFF: bytes]) else {
      Issue.record("\(bytes) decoded")
      return
    }
    #expect(payload.reason == reason)
    #expect(payload.length == bytes.count)
    #expect(!payload.detail.isEmpty)
  }

  @Test func garbageNeverTraps() {
    var generator = SystemRandomNumberGenerator()
    for length in 0..<64 {
      let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
      switch read(folkBears, [0xFFFF: bytes]) {
      case .sighting(let id): #expect(id.count == 32 && length == 18)
      case .malformed(let payload): #expect(payload.length == length)
      case .notTarget: Issue.record("0xFFFF data read as not the target")
      }
    }
  }

  @Test func rawLayoutUsesTheWholePayload() {
    let raw = MonitorTarget.manufacturer(companyID: 0x1234, layout: .raw)
    #expect(read(raw, [0x1234: [0xDE, 0xAD]]) == .sighting(id: "dead"))
    guard case .malformed(let payload) = read(raw, [0x1234: []]) else {
      Issue.record("an empty raw payload decoded")
      return
    }
    #expect(payload.reason == .empty)
    #expect(MonitorTarget.defaultLayout(for: 0x1234) == .raw)
    #expect(MonitorTarget.defaultLayout(for: 0xFFFF) == .folkbears)
  }

  @Test func serviceModeCountsTheAddress() {
    let battery = BluetoothUUID(uint16: 0x180F)
    let target = MonitorTarget.service(battery)
    #expect(read(target, [:], uuids: [battery]) == .sighting(id: "00:AA:01:01:00:01"))
    #expect(read(target, [0xFFFF: [0x02]], uuids: [BluetoothUUID(uint16: 0x180D)]) == .notTarget)
    #expect(target.description == "service 0x180F (Battery)")
  }
}
