// FleetTable: the aggregator's merged view: per ID (or address), which gateways saw it, the
// best RSSI and when it was last seen, in bounded memory.

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

  /// Reads a blekit sighting payload; `nil` for anything else (summaries, other layouts).
  public init?(payload: [UInt8]) {
    guard let json = FleetJSON.parse(payload), json["type"]?.stringValue == "sighting",
      let gateway = json["gateway"]?.stringValue, let address = json["address"]?.stringValue,
      let timestamp = json["timestamp"]?.doubleValue
    else { return nil }
    self.init(
      key: json["id"]?.stringValue ?? address, gateway: gateway, address: address,
      rssi: json["rssi"]?.intValue, timestamp: timestamp, sequence: json["seq"]?.intValue)
  }
}

/// The merged table.
public struct FleetTable: Sendable {
  /// One gateway's view of an ID.
  public struct GatewayView: Sendable, Hashable {
    public var gateway: String
    public var bestRSSI: Int?
    public var lastSeen: Double
    public var count: Int
  }

  /// One ID's row.
  public struct Row: Sendable, Hashable {
    public var key: String
    public var lastAddress: String
    public var gateways: [GatewayView]
    /// The best RSSI any gateway reported.
    public var bestRSSI: Int? { gateways.compactMap(\.bestRSSI).max() }
    /// The latest sighting by any gateway.
    public var lastSeen: Double { gateways.map(\.lastSeen).max() ?? 0 }
    /// Sightings by every gateway.
    public var count: Int { gateways.reduce(0) { $0 + $1.count } }
  }

  /// The most rows kept; the least recently seen is evicted first.
  public let capacity: Int
  /// Rows evicted so far.
  public private(set) var evicted = 0
  /// Availability per gateway, from their status topics (`true`: online).
  public private(set) var gatewayOnline: [String: Bool] = [:]
  private var rows: [String: Row] = [:]

  public init(capacity: Int = 4096) {
    self.capacity = Swift.max(1, capacity)
  }

  /// Rows held.
  public var count: Int { rows.count }

  /// The row of a key.
  public subscript(key: String) -> Row? { rows[key] }

  /// Merges a sighting; returns the updated row.
  @discardableResult
  public mutating func record(_ sighting: FleetSighting) -> Row {
    var row =
      rows[sighting.key] ?? Row(key: sighting.key, lastAddress: sighting.address, gateways: [])
    if rows[sighting.key] == nil, rows.count >= capacity,
      let oldest = rows.values.min(by: { $0.lastSeen < $1.lastSeen })
    {
      rows[oldest.key] = nil
      evicted += 1
    }
    row.lastAddress = sighting.address
    if let index = row.gateways.firstIndex(where: { $0.gateway == sighting.gateway }) {
      var view = row.gateways[index]
      view.count += 1
      view.lastSeen = Swift.max(view.lastSeen, sighting.timestamp)
      if let rssi = sighting.rssi { view.bestRSSI = Swift.max(view.bestRSSI ?? rssi, rssi) }
      row.gateways[index] = view
    } else {
      row.gateways.append(
        GatewayView(
          gateway: sighting.gateway, bestRSSI: sighting.rssi, lastSeen: sighting.timestamp,
          count: 1))
      row.gateways.sort { $0.gateway < $1.gateway }
    }
    rows[sighting.key] = row
    return row
  }

  /// Notes a gateway's availability.
  public mutating func setGateway(_ gateway: String, online: Bool) {
    gatewayOnline[gateway] = online
  }

  /// The rows, most recently seen first (ties by key).
  public var entries: [Row] {
    rows.values.sorted { a, b in a.lastSeen != b.lastSeen ? a.lastSeen > b.lastSeen : a.key < b.key
    }
  }

  /// A row as one JSON object: key, address, best RSSI, last seen, and per gateway its best
  /// RSSI, last seen and count.
  public static func json(_ row: Row) -> FleetJSON {
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
    ])
  }
}
