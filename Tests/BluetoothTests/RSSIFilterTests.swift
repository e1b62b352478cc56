import Bluetooth
import Testing

@Suite struct RSSIFilterTests {
  @Test func seedThresholdMinus50() throws {
    let filter = try RSSIFilter(minimum: -50)
    #expect(filter.admits(-50))
    #expect(filter.admits(-49))
    #expect(filter.admits(20))
    #expect(!filter.admits(-51))
    #expect(!filter.admits(-127))
    #expect(filter.evaluate(-60) == .belowThreshold(rssi: -60, minimum: -50))
    #expect(filter.evaluate(-40) == .passed(rssi: -40))
  }

  @Test func unknownPassesByDefault() throws {
    let filter = try RSSIFilter(minimum: -50)
    #expect(filter.unknownPolicy == .include)
    #expect(filter.admits(127))
    #expect(filter.admits(nil))
    #expect(filter.evaluate(127) == .passedUnknown)
    #expect(filter.evaluate(nil) == .passedUnknown)
  }

  @Test func unknownExcludedOnRequest() throws {
    let filter = try RSSIFilter(minimum: -50, unknownPolicy: .exclude)
    #expect(!filter.admits(127))
    #expect(!filter.admits(nil))
    #expect(filter.evaluate(127) == .excludedUnknown)
    #expect(filter.admits(-10))
  }

  @Test(arguments: [21, 100, 126])
  func reservedValuesCountAsUnknown(rssi: Int) throws {
    #expect(!RSSIFilter.isKnown(rssi))
    #expect(try RSSIFilter(minimum: -50).evaluate(rssi) == .passedUnknown)
    #expect(
      try RSSIFilter(minimum: -50, unknownPolicy: .exclude).evaluate(rssi)
        == .excludedUnknown)
  }

  @Test func noThresholdAdmitsEverything() throws {
    for filter in [RSSIFilter.none, try RSSIFilter(minimum: nil, unknownPolicy: .exclude)] {
      for rssi in [nil, -127, -50, 0, 20, 127] as [Int?] {
        #expect(filter.admits(rssi))
        #expect(filter.evaluate(rssi) == .noThreshold)
      }
    }
  }

  @Test(arguments: [-128, 21, 127, -1000, 1000])
  func rejectsOutOfRangeThresholds(minimum: Int) {
    #expect(throws: RSSIFilter.RangeError(value: minimum)) { try RSSIFilter(minimum: minimum) }
  }

  @Test(arguments: [-127, -50, 0, 20])
  func acceptsInRangeThresholds(minimum: Int) throws {
    #expect(try RSSIFilter(minimum: minimum).minimum == minimum)
  }

  @Test func rangeErrorIsOneClearLine() {
    let text = RSSIFilter.RangeError(value: 30).description
    #expect(text == "RSSI threshold 30 dBm is out of range: expected -127...20 dBm")
  }

  @Test func boundaryThresholds() throws {
    #expect(try RSSIFilter(minimum: -127).admits(-127))
    #expect(try RSSIFilter(minimum: 20).admits(20))
    #expect(!(try RSSIFilter(minimum: 20).admits(19)))
  }
}
