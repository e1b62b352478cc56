// FleetTable: the aggregator's merged view: per ID (or address), which gateways saw it, the
// best RSSI and when it was last seen, in bounded memory.

import JSON

/// One sighting as the aggregator reads it from a gateway's payload.
public struct FleetSighting: Sendable, Hashable {
  /// The monitored ID, or the address when the payload has none.
  public var key: String
  /// The gateway that published it.
  public var gateway: String
  /// The advertiser's address.
  public var address: String
  /// The RSSI, `nil` when unknown.
  public var rssi: Int?
  /// Unix time of the sighting.
  public var timestamp: Double
  /// The gateway's sequence number.
  public var sequence: Int?

  public init(
    key: String, gateway: String, address: String, rssi: Int?, timestamp: Double,
    sequence: Int? = nil
  ) {
    self.key = key
    self.gateway = gateway
    self.address = address
    self.rssi = rssi
    self.timestamp = timestamp
    self.sequence = sequence
  }

  /// The longest key, gateway name and address a sighting may carry, in UTF-8 bytes: a
  /// FolkBears ID is 32, an address 17, a host name at most 64 (HOST_NAME_MAX).
  public static let maximumTextLength = 256

  /// Reads a blekit sighting payload; `nil` for anything else (summaries, other layouts) and
  /// for a sighting whose key, gateway or address is empty or longer than
  /// ``maximumTextLength``. An RSSI outside -128...127 (HCI's range) reads as unknown.
  public init?(payload: [UInt8]) {
    guard let json = FleetSighting.parsePayload(payload) else { return nil }
    self.init(json: json)
  }

  /// How deep a payload read from the broker may nest: 32 levels (a sighting has 2).
  public static let maximumDepth = 32

  /// A payload as JSON; `nil` when it is not one JSON value or nests deeper than
  /// ``maximumDepth`` (see `JSONValue.parse(_:maximumDepth:)` for what else is refused).
  public static func parsePayload(_ payload: [UInt8]) -> JSONValue? {
    try? JSONValue.parse(payload, maximumDepth: maximumDepth)
  }

  /// Reads a parsed sighting payload (see ``init(payload:)``).
  public init?(json: JSONValue) {
    guard json["type"]?.stringValue == "sighting",
      let gateway = json["gateway"]?.stringValue, let address = json["address"]?.stringValue,
      let timestamp = json["timestamp"]?.doubleValue, timestamp.isFinite
    else { return nil }
    let key = json["id"]?.stringValue ?? address
    for text in [key, gateway, address] {
      guard !text.isEmpty, text.utf8.count <= Self.maximumTextLength else { return nil }
    }
    let rssi = json["rssi"]?.intValue.flatMap { (-128...127).contains($0) ? $0 : nil }
    self.init(
      key: key, gateway: gateway, address: address, rssi: rssi, timestamp: timestamp,
      sequence: json["seq"]?.intValue)
  }
}

/// The merged table, in bounded memory: at most ``capacity`` rows, ``gatewaysPerRow`` gateways
/// in a row and ``gatewayCapacity`` gateways' availability. Beyond each bound the least
/// recently heard entry goes, counted. "Recently" is the order messages arrived in, never a
/// timestamp a payload carries: a publisher choosing a far-future timestamp cannot keep its
/// rows, or the top of the table, to itself.
public struct FleetTable: Sendable {
  /// One gateway's view of an ID.
  public struct GatewayView: Sendable, Hashable {
    public var gateway: String
    public var bestRSSI: Int?
    public var lastSeen: Double
    public var count: Int
    /// When this gateway's last sighting of the ID arrived (the table's arrival counter).
    var heard: UInt64
  }

  /// One ID's row.
  public struct Row: Sendable, Hashable {
    public var key: String
    public var lastAddress: String
    public var gateways: [GatewayView]
    /// Gateways dropped from this row to keep it within ``FleetTable/gatewaysPerRow``.
    public var droppedGateways = 0
    /// When the row's last sighting arrived (the table's arrival counter).
    var heard: UInt64 = 0
    /// The best RSSI any gateway reported.
    public var bestRSSI: Int? { gateways.compactMap(\.bestRSSI).max() }
    /// The latest sighting by any gateway.
    public var lastSeen: Double { gateways.map(\.lastSeen).max() ?? 0 }
    /// Sightings by every gateway.
    public var count: Int { gateways.reduce(0) { $0 &+ $1.count } }
  }

  /// The most rows kept; the least recently heard is evicted first.
  public let capacity: Int
  /// The most gateways kept in one row; the least recently heard is dropped first.
  public let gatewaysPerRow: Int
  /// The most gateways whose availability is kept; the least recently heard is forgotten.
  public let gatewayCapacity: Int
  /// Rows evicted so far.
  public private(set) var evicted = 0
  /// Gateways dropped from rows so far.
  public private(set) var droppedGateways = 0
  /// Gateways whose availability was forgotten so far.
  public private(set) var forgottenGateways = 0
  private var rows: [String: Row] = [:]
  private var availability: [String: (online: Bool, heard: UInt64)] = [:]
  /// Counts arrivals: the order "least recently heard" means.
  private var clock: UInt64 = 0

  public init(capacity: Int = 4096, gatewaysPerRow: Int = 32, gatewayCapacity: Int = 1024) {
    self.capacity = Swift.max(1, capacity)
    self.gatewaysPerRow = Swift.max(1, gatewaysPerRow)
    self.gatewayCapacity = Swift.max(1, gatewayCapacity)
  }

  /// Rows held.
  public var count: Int { rows.count }

  /// The row of a key.
  public subscript(key: String) -> Row? { rows[key] }

  /// Availability per gateway, from their status topics (`true`: online).
  public var gatewayOnline: [String: Bool] { availability.mapValues(\.online) }

  /// Merges a sighting; returns the updated row.
  @discardableResult
  public mutating func record(_ sighting: FleetSighting) -> Row {
    clock += 1
    var row =
      rows[sighting.key] ?? Row(key: sighting.key, lastAddress: sighting.address, gateways: [])
    if rows[sighting.key] == nil, rows.count >= capacity,
      let oldest = rows.values.min(by: { $0.heard < $1.heard })
    {
      rows[oldest.key] = nil
      evicted += 1
    }
    row.heard = clock
    row.lastAddress = sighting.address
    if let index = row.gateways.firstIndex(where: { $0.gateway == sighting.gateway }) {
      var view = row.gateways[index]
      view.count &+= 1
      view.heard = clock
      view.lastSeen = Swift.max(view.lastSeen, sighting.timestamp)
      if let rssi = sighting.rssi { view.bestRSSI = Swift.max(view.bestRSSI ?? rssi, rssi) }
      row.gateways[index] = view
    } else {
      if row.gateways.count >= gatewaysPerRow,
        let oldest = row.gateways.indices.min(by: {
          row.gateways[$0].heard < row.gateways[$1].heard
        })
      {
        row.gateways.remove(at: oldest)
        row.droppedGateways += 1
        droppedGateways += 1
      }
      row.gateways.append(
        GatewayView(
          gateway: sighting.gateway, bestRSSI: sighting.rssi, lastSeen: sighting.timestamp,
          count: 1, heard: clock))
      row.gateways.sort { $0.gateway < $1.gateway }
    }
    rows[sighting.key] = row
    return row
  }

  /// Notes a gateway's availability; returns whether it is news (a gateway not known, or
  /// known as the other state).
  @discardableResult
  public mutating func setGateway(_ gateway: String, online: Bool) -> Bool {
    clock += 1
    let known = availability[gateway]?.online
    if known == nil, availability.count >= gatewayCapacity,
      let oldest = availability.min(by: { $0.value.heard < $1.value.heard })
    {
      availability[oldest.key] = nil
      forgottenGateways += 1
    }
    availability[gateway] = (online, clock)
    return known != online
  }

  /// The rows, most recently heard first.
  public var entries: [Row] {
    rows.values.sorted { $0.heard > $1.heard }
  }

  /// How long ago `lastSeen` (Unix seconds) is at `now`, for a terminal: `12s ago`; `ahead`
  /// when it is more than a minute in the future (a gateway's clock, or a chosen timestamp),
  /// `0s ago` when less; `?` when it is more than 10^9 s (31 years) ago.
  public static func age(of lastSeen: Double, now: Double) -> String {
    let age = now - lastSeen
    if age.isNaN || age >= 1e9 { return "?" }
    if age <= -60 { return "ahead" }
    return "\(Swift.max(0, Int(age)))s ago"
  }

  /// A row as one JSON object: key, address, best RSSI, last seen, and per gateway its best
  /// RSSI, last seen and count; `droppedGateways` says how many gateways the row let go.
  public static func json(_ row: Row) -> JSONValue {
    .object([
      .init("id", .string(row.key)),
      .init("address", .string(row.lastAddress)),
      .init("bestRSSI", row.bestRSSI.map { .int($0) } ?? .null),
      .init("lastSeen", .number(row.lastSeen)),
      .init("count", .int(row.count)),
      .init(
        "gateways",
        .array(
          row.gateways.map { view in
            .object([
              .init("gateway", .string(view.gateway)),
              .init("bestRSSI", view.bestRSSI.map { .int($0) } ?? .null),
              .init("lastSeen", .number(view.lastSeen)),
              .init("count", .int(view.count)),
            ])
          })),
      .init("droppedGateways", .int(row.droppedGateways)),
    ])
  }
}
