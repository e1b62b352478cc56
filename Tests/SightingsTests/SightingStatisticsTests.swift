import BLEKit
import Sightings
import Testing

@Suite struct SightingStatisticsTests {
  let start = ContinuousClock.Instant.now

  @Test func countsAndRSSIFigures() {
    var stats = SightingStatistics(at: start, rssi: -60)
    stats.record(at: start.advanced(by: .seconds(10)), rssi: -40)
    stats.record(at: start.advanced(by: .seconds(20)), rssi: -50)
    #expect(stats.count == 3)
    #expect(stats.minimumRSSI == -60)
    #expect(stats.maximumRSSI == -40)
    #expect(stats.meanRSSI == -50)
    #expect(stats.firstSeen == start)
    #expect(stats.lastSeen == start.advanced(by: .seconds(20)))
  }

  @Test func unknownRSSICountsAsASightingOnly() {
    var stats = SightingStatistics(at: start, rssi: 127)
    stats.record(at: start, rssi: nil)
    #expect(stats.count == 2)
    #expect(stats.knownRSSICount == 0)
    #expect(stats.meanRSSI == nil)
    #expect(stats.minimumRSSI == nil)
    stats.record(at: start, rssi: -70)
    #expect(stats.meanRSSI == -70)
    #expect(stats.knownRSSICount == 1)
  }

  @Test func sightingsPerMinute() {
    var stats = SightingStatistics(at: start, rssi: nil)
    for second in 1..<30 { stats.record(at: start.advanced(by: .seconds(second)), rssi: nil) }
    #expect(stats.sightingsPerMinute(over: .seconds(30)) == 60)
    #expect(stats.sightingsPerMinute(over: .seconds(120)) == 15)
    #expect(stats.sightingsPerMinute(over: .zero) == nil)
  }

  @Test func lastSeenNeverGoesBack() {
    var stats = SightingStatistics(at: start.advanced(by: .seconds(5)), rssi: -1)
    stats.record(at: start, rssi: -1)
    #expect(stats.lastSeen == start.advanced(by: .seconds(5)))
  }
}
