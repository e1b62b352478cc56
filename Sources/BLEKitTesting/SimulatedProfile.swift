// A simulated peripheral from a `blekit serve` profile (docs/serve.md), such as one that
// `blekit clone` wrote: the subset that describes a database and its values.
import BLEKit
import Bluetooth
import Foundation

extension SimulatedPeripheral {
  /// A peripheral with the services, characteristics, descriptors, values and advertisement of
  /// a `blekit serve` profile (docs/serve.md's schema; `blekit clone ADDRESS -o FILE` writes
  /// one from a real device).
  ///
  /// Read: `advertise` (`name`, `services`, `manufacturerData`, `serviceData`); each service's
  /// `uuid`, `primary` and characteristics; each characteristic's `uuid`, `properties`,
  /// `value`, `readError` (requests to it then fail with that ATT error, see
  /// ``SimulatedFault/attError(_:)``: its writes and subscriptions too, where serve refuses
  /// only reads), `description` (a 0x2901 descriptor) and `descriptors`.
  /// Values: text, `hex`, the integer forms, a `cycle` (its first value) and a `counter` (its
  /// `from`, after its `prefix`).
  /// Not run: notifiers (the test sends values with ``notify(_:for:)``), `file` and `command`
  /// values (refused with an error: give the value with ``setValue(_:for:)``), `writes`,
  /// `permissions` and `format`.
  /// - Throws: ``SimulationError`` naming the place in the file that it cannot read.
  public convenience init(profile: URL, address: BluetoothAddress, rssi: Int = -60) throws {
    let data = try Data(contentsOf: profile)
    let root = try JSONSerialization.jsonObject(with: data)
    let reader = ProfileReader(file: profile.lastPathComponent)
    let (advertisement, services) = try reader.read(root, rssi: rssi)
    self.init(address: address, advertisement: advertisement, services: services)
    for (uuid, code) in reader.readErrors(root) { fail(uuid, with: .attError(code)) }
  }
}

/// Reads the parts of a serve profile a simulation uses.
struct ProfileReader {
  let file: String

  func fail(_ place: String, _ reason: String) -> SimulationError {
    SimulationError("\(file): \(place): \(reason)")
  }

  func read(_ root: Any, rssi: Int) throws -> (SimulatedAdvertisement, [SimulatedService]) {
    guard let top = root as? [String: Any], let list = top["services"] as? [Any], !list.isEmpty
    else { throw fail("services", "missing: a non-empty array of services") }
    var services: [SimulatedService] = []
    for (index, item) in list.enumerated() {
      services.append(try service(item, at: "services[\(index)]"))
    }
    var advertisement = SimulatedAdvertisement(rssi: rssi)
    if let advertise = top["advertise"] as? [String: Any] {
      advertisement.name = advertise["name"] as? String
      if let uuids = advertise["services"] as? [Any] {
        advertisement.serviceUUIDs = try uuids.enumerated().map {
          try uuid($0.element, at: "advertise.services[\($0.offset)]")
        }
      }
      for (key, value) in advertise["manufacturerData"] as? [String: Any] ?? [:] {
        guard let company = UInt16(key, radix: 16) else {
          throw fail("advertise.manufacturerData", "'\(key)' is not a company identifier")
        }
        advertisement.manufacturerData[company] = try hex(value, at: "advertise.manufacturerData")
      }
      for (key, value) in advertise["serviceData"] as? [String: Any] ?? [:] {
        advertisement.serviceData[try uuid(key, at: "advertise.serviceData")] = try hex(
          value, at: "advertise.serviceData")
      }
    }
    if advertisement.serviceUUIDs.isEmpty, let first = services.first(where: \.isPrimary) {
      advertisement.serviceUUIDs = [first.uuid]  // serve's default
    }
    return (advertisement, services)
  }

  private func service(_ item: Any, at place: String) throws -> SimulatedService {
    guard let object = item as? [String: Any], let list = object["characteristics"] as? [Any]
    else { throw fail(place, "a service needs uuid and characteristics") }
    var characteristics: [SimulatedCharacteristic] = []
    for (index, entry) in list.enumerated() {
      characteristics.append(try characteristic(entry, at: "\(place).characteristics[\(index)]"))
    }
    return SimulatedService(
      uuid: try uuid(object["uuid"] as Any, at: "\(place).uuid"),
      isPrimary: object["primary"] as? Bool ?? true, characteristics: characteristics)
  }

  private func characteristic(_ item: Any, at place: String) throws -> SimulatedCharacteristic {
    guard let object = item as? [String: Any] else { throw fail(place, "not an object") }
    let names: [String: CharacteristicProperties] = [
      "read": .read, "write": .write, "write-without-response": .writeWithoutResponse,
      "notify": .notify, "indicate": .indicate,
    ]
    var properties: CharacteristicProperties = []
    for name in object["properties"] as? [String] ?? [] {
      guard let property = names[name] else {
        throw fail("\(place).properties", "unknown property '\(name)'")
      }
      properties.insert(property)
    }
    var descriptors: [SimulatedDescriptor] = []
    if let text = object["description"] as? String {
      descriptors.append(
        SimulatedDescriptor(uuid: BluetoothUUID(uint16: 0x2901), value: Array(text.utf8)))
    }
    for (index, entry) in (object["descriptors"] as? [Any] ?? []).enumerated() {
      let where_ = "\(place).descriptors[\(index)]"
      guard let descriptor = entry as? [String: Any] else { throw fail(where_, "not an object") }
      descriptors.append(
        SimulatedDescriptor(
          uuid: try uuid(descriptor["uuid"] as Any, at: "\(where_).uuid"),
          value: try descriptor["value"].map { try value($0, at: "\(where_).value") } ?? []))
    }
    return SimulatedCharacteristic(
      uuid: try uuid(object["uuid"] as Any, at: "\(place).uuid"), properties: properties,
      value: try object["value"].map { try value($0, at: "\(place).value") } ?? [],
      descriptors: descriptors)
  }

  /// The ATT error code of a characteristic's `readError`, if it has one.
  func readErrors(_ root: Any) -> [BluetoothUUID: UInt8] {
    let codes: [String: UInt8] = [
      "read-not-permitted": 0x02, "insufficient-authentication": 0x05,
      "request-not-supported": 0x06, "insufficient-authorization": 0x08,
      "insufficient-encryption": 0x0F,
    ]
    var result: [BluetoothUUID: UInt8] = [:]
    for service in (root as? [String: Any])?["services"] as? [[String: Any]] ?? [] {
      for characteristic in service["characteristics"] as? [[String: Any]] ?? [] {
        guard let name = characteristic["readError"] as? String,
          let uuid = try? uuid(characteristic["uuid"] as Any, at: "")
        else { continue }
        if let code = codes[name]
          ?? (name.hasPrefix("0x") ? UInt8(name.dropFirst(2), radix: 16) : nil)
        {
          result[uuid] = code
        }
      }
    }
    return result
  }

  private func uuid(_ item: Any, at place: String) throws -> BluetoothUUID {
    guard let text = item as? String, let uuid = try? BluetoothUUID(text) else {
      throw fail(place, "not a UUID")
    }
    return uuid
  }

  private func hex(_ item: Any, at place: String) throws -> [UInt8] {
    guard let text = item as? String else { throw fail(place, "not hex bytes") }
    let digits = text.filter { $0 != " " }
    guard digits.count % 2 == 0 else { throw fail(place, "an odd number of hex digits") }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
      let next = digits.index(index, offsetBy: 2)
      guard let byte = UInt8(digits[index..<next], radix: 16) else {
        throw fail(place, "'\(text)' is not hex")
      }
      bytes.append(byte)
      index = next
    }
    return bytes
  }

  private func value(_ item: Any, at place: String) throws -> [UInt8] {
    if let text = item as? String { return Array(text.utf8) }
    guard let object = item as? [String: Any], let (kind, content) = object.first,
      object.count == 1
    else { throw fail(place, "not a value source") }
    func number(_ width: Int, signed: Bool) throws -> [UInt8] {
      guard let number = content as? NSNumber else { throw fail(place, "not a number") }
      let value = number.int64Value
      let bits = Int64(width * 8)
      let (low, high): (Int64, Int64) =
        signed ? (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) : (0, (1 << bits) - 1)
      guard value >= low, value <= high else { throw fail(place, "\(value) is out of range") }
      return (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * Int64($0))) }
    }
    switch kind {
    case "text":
      guard let text = content as? String else { throw fail(place, "not text") }
      return Array(text.utf8)
    case "hex": return try hex(content, at: place)
    case "uint8": return try number(1, signed: false)
    case "uint16": return try number(2, signed: false)
    case "uint32": return try number(4, signed: false)
    case "sint8": return try number(1, signed: true)
    case "sint16": return try number(2, signed: true)
    case "sint32": return try number(4, signed: true)
    case "cycle":
      guard let values = content as? [Any], let first = values.first else {
        throw fail(place, "an empty cycle")
      }
      return try value(first, at: "\(place).cycle[0]")
    case "counter":
      let counter = content as? [String: Any] ?? [:]
      let prefix = try counter["prefix"].map { try hex($0, at: "\(place).counter.prefix") } ?? []
      let width = (counter["width"] as? NSNumber)?.intValue ?? 1
      let from = (counter["from"] as? NSNumber)?.int64Value ?? 0
      return prefix + (0..<width).map { UInt8(truncatingIfNeeded: from >> (8 * Int64($0))) }
    default:
      throw fail(
        place, "a '\(kind)' value is not simulated: give the value with setValue(_:for:)")
    }
  }
}
