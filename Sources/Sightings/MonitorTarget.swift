// MonitorTarget: what a contact monitor (FolkBears', `blekit monitor`) counts, and how one
// discovery reads as a sighting of an ID, a malformed payload, or nothing of interest.

import BLEKit

/// How the bytes of the selected company's manufacturer data become an ID.
public enum ManufacturerLayout: String, Sendable, Hashable, CaseIterable {
  /// FolkBears: type 0x02, length 0x10, then a 16-byte temporary user ID
  /// (``FolkBearsTempUserID``); anything else is malformed.
  case folkbears
  /// The whole payload is the ID; only an empty payload is malformed.
  case raw
}

/// What a monitor counts sightings of.
public enum MonitorTarget: Sendable, Hashable, CustomStringConvertible {
  /// The manufacturer data of one company, decoded with a layout; the ID is the decoded bytes
  /// in hex.
  case manufacturer(companyID: UInt16, layout: ManufacturerLayout)
  /// Advertisers of one service (a monitor of the GATT type); the ID is the device address.
  case service(BluetoothUUID)

  /// The layout used for a company when none is asked for: FolkBears for 0xFFFF, raw for
  /// every other company.
  public static func defaultLayout(for companyID: UInt16) -> ManufacturerLayout {
    companyID == FolkBearsTempUserID.companyID ? .folkbears : .raw
  }

  /// E.g. `company 0xFFFF (FolkBears TempUserId)` or `service 0x180F (Battery)`.
  public var description: String {
    switch self {
    case .manufacturer(let company, let layout):
      let what = layout == .folkbears ? "FolkBears TempUserId" : "raw payload"
      return "company \(HexBytes.companyID(company)) (\(what))"
    case .service(let uuid):
      let name = AssignedNumbers.serviceName(uuid).map { " (\($0))" } ?? ""
      return "service \(HexBytes.uuidLabel(uuid))\(name)"
    }
  }

  /// Reads one advertisement report. Never traps, whatever the bytes.
  ///
  /// - Parameters:
  ///   - address: the advertiser's address (the ID in service mode).
  ///   - serviceUUIDs: the advertised service UUIDs.
  ///   - manufacturerData: BlueZ's `ManufacturerData`: company ID to the bytes after it.
  public func read(
    address: String, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt16: [UInt8]]
  ) -> MonitorReading {
    switch self {
    case .service(let uuid):
      return serviceUUIDs.contains(uuid) ? .sighting(id: address) : .notTarget
    case .manufacturer(let company, let layout):
      guard let bytes = manufacturerData[company] else { return .notTarget }
      switch layout {
      case .raw:
        guard !bytes.isEmpty else {
          return .malformed(MalformedPayload(reason: .empty, length: 0, detail: "empty payload"))
        }
        return .sighting(id: HexBytes.format(bytes))
      case .folkbears:
        do throws(FolkBearsDecodingError) {
          return .sighting(id: try FolkBearsTempUserID(data: bytes).hex)
        } catch {
          return .malformed(MalformedPayload(error, length: bytes.count))
        }
      }
    }
  }

  /// Reads a discovery (see ``read(address:serviceUUIDs:manufacturerData:)``).
  public func read(_ discovery: Discovery) -> MonitorReading {
    read(
      address: discovery.address.rawValue, serviceUUIDs: discovery.serviceUUIDs,
      manufacturerData: discovery.manufacturerData)
  }
}

/// What one advertisement report means to a monitor.
public enum MonitorReading: Sendable, Hashable {
  /// A sighting of this ID.
  case sighting(id: String)
  /// The selected company's payload, which does not decode: counted and skipped.
  case malformed(MalformedPayload)
  /// Nothing the monitor counts (another company, another service).
  case notTarget
}

/// A payload that does not decode, and why.
public struct MalformedPayload: Sendable, Hashable, CustomStringConvertible {
  /// The kinds of malformation, a closed set so that counts by reason stay bounded.
  public enum Reason: String, Sendable, Hashable, CaseIterable, Comparable {
    case empty = "empty"
    case tooShort = "too short"
    case wrongType = "wrong type byte"
    case wrongLength = "wrong length byte"
    case trailingBytes = "trailing bytes"

    public static func < (lhs: Reason, rhs: Reason) -> Bool {
      allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
  }

  /// The kind.
  public let reason: Reason
  /// The payload's length (after the company ID).
  public let length: Int
  /// One line saying what is wrong.
  public let detail: String

  /// Creates a description of a malformed payload.
  public init(reason: Reason, length: Int, detail: String) {
    self.reason = reason
    self.length = length
    self.detail = detail
  }

  /// The malformation a FolkBears decoding error describes.
  public init(_ error: FolkBearsDecodingError, length: Int) {
    let reason: Reason =
      switch error {
      case .tooShort: length == 0 ? .empty : .tooShort
      case .wrongType: .wrongType
      case .wrongLength: .wrongLength
      case .trailingBytes: .trailingBytes
      case .wrongCompany: .wrongType  // not reachable: the company is checked before
      }
    self.init(reason: reason, length: length, detail: error.description)
  }

  public var description: String { detail }
}
