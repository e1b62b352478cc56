// libFuzzer target: a `blekit serve` profile (a file that may come from anyone: a download, a
// shared repository). The input is read by `JSONValue.parse` (the JSON module) and by
// `ServeProfile.decode` (Sources/blekit/Serve/ServeProfile.swift, ServeProfileDecoding.swift,
// with the BLEKit and ArgumentParsing types they use). Built by scripts/fuzz.

import ArgumentParsing
import BLEKit
import JSON

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProfileJSON(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: start, count: count))

  // The reader: a document reads back the same once written out; a syntax error points
  // inside the input.
  do {
    let json = try JSONValue.parse(bytes, maximumDepth: ServeProfile.maximumDepth)
    let written = Array(profileJSONText(json).utf8)
    do {
      let again = try JSONValue.parse(written, maximumDepth: ServeProfile.maximumDepth)
      fuzzCheck(again == json, "a written document reads back differently")
    } catch {
      fuzzCheck(false, "a written document does not parse: \(error.reason)")
    }
  } catch {
    let lines = bytes.lazy.filter { $0 == UInt8(ascii: "\n") }.count + 1
    fuzzCheck(error.line >= 1 && error.line <= lines, "syntax error on line \(error.line)")
    fuzzCheck(
      error.column >= 1 && error.column <= bytes.count + 1, "syntax error at column \(error.column)"
    )
  }

  // The schema: a profile keeps its promises, a refusal is one line a terminal shows as text.
  do {
    let profile = try ServeProfile.decode(bytes, file: "fuzz.json")
    checkProfile(profile)
  } catch {
    let line = error.description
    for scalar in line.unicodeScalars {
      fuzzCheck(
        scalar == "\\" || !TerminalText.needsEscape(scalar),
        "a refusal shows U+\(String(scalar.value, radix: 16)) raw: \(line.debugDescription)")
    }
    fuzzCheck(error.exitStatus == .usage, "a refusal is not a usage error")
  }
  return 0
}

/// What `ServeProfile.decode` promises of a profile it accepts (docs/serve.md).
func checkProfile(_ profile: ServeProfile) {
  fuzzCheck(!profile.services.isEmpty, "a profile without services")
  var standardInputs = 0
  for service in profile.services {
    fuzzCheck(!service.characteristics.isEmpty, "a service without characteristics")
    for characteristic in service.characteristics {
      fuzzCheck(!characteristic.properties.isEmpty, "a characteristic without properties")
      fuzzCheck(
        (characteristic.value != nil) == characteristic.properties.contains(.read),
        "a value without reads, or reads without a value")
      if let value = characteristic.value { checkSource(value) }
      switch characteristic.notifier {
      case .periodic(let interval, let value)?:
        fuzzCheck(
          interval >= .milliseconds(10) && interval <= .seconds(3600),
          "a notifier every \(interval)")
        checkSource(value)
      case .standardInput?: standardInputs += 1
      case nil: break
      }
      for descriptor in characteristic.descriptors {
        fuzzCheck(
          descriptor.value.count <= ServeProfile.maximumValueLength,
          "a descriptor of \(descriptor.value.count) bytes")
      }
      let uuids = characteristic.descriptors.map(\.uuid)
      fuzzCheck(Set(uuids).count == uuids.count, "a descriptor given twice")
    }
  }
  fuzzCheck(standardInputs <= 1, "\(standardInputs) notifiers read standard input")
}

func checkSource(_ source: ServeProfile.ValueSource) {
  switch source {
  case .fixed(let bytes):
    fuzzCheck(bytes.count <= ServeProfile.maximumValueLength, "a value of \(bytes.count) bytes")
  case .file(let name): fuzzCheck(!name.isEmpty, "an empty file name")
  case .command(let command): fuzzCheck(!command.isEmpty, "an empty command")
  case .counter(let counter):
    fuzzCheck([1, 2, 4].contains(counter.width), "a counter \(counter.width) bytes wide")
    let maximum = counter.width == 4 ? Int64(UInt32.max) : (Int64(1) << (8 * counter.width)) - 1
    fuzzCheck(
      (0...maximum).contains(counter.from) && (0...maximum).contains(counter.to),
      "a counter from \(counter.from) to \(counter.to) in \(counter.width) bytes")
    fuzzCheck(counter.step != 0, "a counter that never counts")
    fuzzCheck(
      counter.step > 0 ? counter.from <= counter.to : counter.from >= counter.to,
      "a counter that never reaches its end")
    fuzzCheck(
      counter.prefix.count + counter.width <= ServeProfile.maximumValueLength,
      "a counter's value over the limit")
  case .cycle(let values):
    fuzzCheck(
      !values.isEmpty && values.count <= ProfileDecoder.maximumCycleLength,
      "a cycle of \(values.count) values")
    for value in values {
      fuzzCheck(
        value.count <= ServeProfile.maximumValueLength, "a cycle value of \(value.count) bytes")
    }
  }
}

/// JSON text for a document: strings with every scalar below U+0020, `"` and `\` escaped,
/// numbers exactly (an integer as it is, any other in Swift's shortest round-trip form, not
/// the writer's 3 decimals).
func profileJSONText(_ json: JSONValue) -> String {
  switch json {
  case .string(let text): return quoted(text)
  case .int(let number): return String(number)
  case .number(let number): return "\(number)"
  case .bool(let flag): return flag ? "true" : "false"
  case .null: return "null"
  case .array(let items): return "[" + items.map(profileJSONText).joined(separator: ",") + "]"
  case .object(let fields):
    return "{"
      + fields.map { quoted($0.key) + ":" + profileJSONText($0.value) }.joined(
        separator: ",") + "}"
  }
}

func quoted(_ text: String) -> String {
  var out = "\""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": out += "\\\""
    case "\\": out += "\\\\"
    case _ where scalar.value < 0x20:
      let digits = String(scalar.value, radix: 16)
      out += "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    default: out.unicodeScalars.append(scalar)
    }
  }
  return out + "\""
}
