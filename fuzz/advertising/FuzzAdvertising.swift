// libFuzzer target: the advertisement decoders (AD structures, manufacturer and service data,
// FolkBears IDs, hex text, UUID and address text). Built by scripts/fuzz.
@testable import BLEKit
import Bluetooth

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdvertising(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  let raw = input.bytes

  // Raw advertising data: parse never reads past the end, and what it keeps re-encodes to a
  // prefix of the input.
  let parsed = ADStructure.parse(raw)
  let reencoded = parsed.structures.flatMap(\.bytes)
  fuzzCheck(raw.starts(with: reencoded), "re-encoded AD structures are not a prefix")
  for structure in parsed.structures {
    switch structure.type {
    case ADStructure.manufacturerSpecificData:
      if let manufacturer = try? ManufacturerData(adPayload: structure.data) {
        fuzzCheck(
          (try? ManufacturerData(adPayload: manufacturer.adPayload)) == manufacturer,
          "manufacturer data does not round-trip")
        _ = manufacturer.description
        if let id = try? FolkBearsTempUserID(manufacturer) {
          fuzzCheck(id.manufacturerData == manufacturer, "FolkBears ID does not round-trip")
          _ = id.hex
        }
      }
    case ServiceData.type16, ServiceData.type32, ServiceData.type128:
      if let service = try? ServiceData(adType: structure.type, payload: structure.data) {
        let again = try? ServiceData(adType: service.adType, payload: service.adPayload)
        fuzzCheck(again == service, "service data does not round-trip")
        _ = service.description
      }
    case ADStructure.completeLocalName, ADStructure.shortenedLocalName:
      _ = HexBytes.printableText(structure.data)
    default:
      _ = HexBytes.format(structure.data, separator: " ")
    }
  }

  // The same bytes as text: hex, UUIDs and addresses parse or refuse, never trap.
  let text = String(decoding: input.rest(), as: UTF8.self)
  if let bytes = try? HexBytes.parse(text) {
    fuzzCheck((try? HexBytes.parse(HexBytes.format(bytes))) == bytes, "hex does not round-trip")
  }
  if let uuid = try? BluetoothUUID(text) {
    fuzzCheck((try? BluetoothUUID(uuid.uuidString)) == uuid, "UUID does not round-trip")
    _ = BluetoothUUID(advertisingBytes: uuid.advertisingBytes)
  }
  if let address = BluetoothAddress(rawValue: text) {
    fuzzCheck(BluetoothAddress(rawValue: address.rawValue) == address, "address round-trip")
    _ = BluetoothAddress(objectPathComponent: address.objectPathComponent)
  }
  _ = BluetoothUUID(advertisingBytes: raw.prefix(16))
  return 0
}
