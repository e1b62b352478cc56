// libFuzzer target: what `blekit fleet` reads from a broker. The input is a message,
// `TOPIC NUL PAYLOAD` (no NUL: a payload under a sighting topic), read as JSON, as a
// FleetUpdate (sighting, status, summary) and merged into a small FleetTable, then each line of
// the payload as a further message of its own. Built by scripts/fuzz.

import JSON

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFleetJSON(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  let input = Array(UnsafeBufferPointer(start: start, count: count))
  let topic: String
  let payload: [UInt8]
  if let nul = input.firstIndex(of: 0) {
    topic = String(decoding: input[..<nul], as: UTF8.self)
    payload = Array(input[(nul + 1)...])
  } else {
    topic = "blekit/fuzz/ids/x"
    payload = input
  }
  var table = FleetTable(capacity: 4, gatewaysPerRow: 3, gatewayCapacity: 2)
  var messages = [(topic, payload)]
  for line in payload.split(separator: UInt8(ascii: "\n")).prefix(64)
  where line.count < payload.count {
    messages.append(("blekit/fuzz-\(messages.count)/status", Array(line)))
  }
  for (topic, payload) in messages {
    checkJSON(payload)
    switch FleetUpdate(topic: topic, payload: payload) {
    case .sighting(let sighting):
      for text in [sighting.key, sighting.gateway, sighting.address] {
        fuzzCheck(
          !text.isEmpty && text.utf8.count <= FleetSighting.maximumTextLength,
          "a sighting's text is empty or longer than the limit")
      }
      fuzzCheck(sighting.timestamp.isFinite, "a sighting's timestamp is not finite")
      if let rssi = sighting.rssi { fuzzCheck((-128...127).contains(rssi), "RSSI out of range") }
      let row = table.record(sighting)
      fuzzCheck(row.gateways.count <= table.gatewaysPerRow, "a row holds too many gateways")
      let text = FleetTable.json(row).text
      fuzzCheck(
        FleetSighting.parsePayload(Array(text.utf8)) != nil, "a row's JSON does not parse")
      for now in [0, 1.8e9, -1e300, 1e300, sighting.timestamp] {
        _ = FleetTable.age(of: row.lastSeen, now: now)
      }
    case .availability(let gateway, let online):
      fuzzCheck(
        !gateway.isEmpty && gateway.utf8.count <= FleetSighting.maximumTextLength,
        "a status names an empty or too long gateway")
      table.setGateway(gateway, online: online)
    case .summary, .unreadable:
      break
    }
    fuzzCheck(table.count <= table.capacity, "more rows than the capacity")
    fuzzCheck(table.gatewayOnline.count <= table.gatewayCapacity, "more gateways than the capacity")
  }
  _ = table.entries
  return 0
}

/// Whatever parses writes as JSON that parses to the same text again (numbers are rounded
/// once, on the first writing), with nothing a terminal would act on left raw.
func checkJSON(_ payload: [UInt8]) {
  guard let value = FleetSighting.parsePayload(payload) else { return }
  let text = value.text
  guard let again = FleetSighting.parsePayload(Array(text.utf8)) else {
    fuzzCheck(false, "written JSON does not parse: \(text)")
    return
  }
  fuzzCheck(again.text == text, "writing is not stable: \(text) then \(again.text)")
  for scalar in text.unicodeScalars {
    fuzzCheck(!JSONValue.escapedInText(scalar), "raw U+\(String(scalar.value, radix: 16)) written")
  }
  fuzzCheck(!text.utf8.contains(0x1B), "raw ESC written")
}
