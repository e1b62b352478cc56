// libFuzzer target: MessageReader's fast paths and WireBody, against the whole-body decode.
// Each message of the input (raw, or a body under one of bluetoothd's signal and reply shapes;
// see fuzz/support/FuzzMessages.swift) is validated by libdbus (DBusMessage(wireBytes:), as
// libdbus validates every message it receives) and decoded whole (DBusMessage.arguments());
// then a MessageReader reads the same message, each argument with a reader the input picks
// (the one that fits its type, `value()`, or any other), and must agree with the whole decode
// or, where the reader does not fit the type, refuse. WireBody must read each argument at exactly the depth
// the value needs, and its table of common variant signatures must agree with the parser.
// Built by scripts/fuzz, against the DBus module built for testing (its internals: WireBody,
// DBusType, the message's libdbus pointer).
@testable import DBus

#if canImport(Glibc)
  import Glibc
#endif

/// FUZZ_VERBOSE=1 prints each message's signature and what the decoder read.
private let verbose = getenv("FUZZ_VERBOSE") != nil

/// The shapes of what bluetoothd sends on every change, for bodies the input gives alone.
let readerShapes: [MessageShape] = [
  .signal(
    "org.freedesktop.DBus.ObjectManager", "InterfacesAdded", "oa{sa{sv}}", path: "/"),
  .signal("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved", "oas", path: "/"),
  .signal(
    "org.freedesktop.DBus.Properties", "PropertiesChanged", "sa{sv}as",
    path: "/org/bluez/hci0/dev_00_AA_01_01_00_01"),
  .reply("a{oa{sa{sv}}}"),
  .reply("a{sv}"),
  .reply("aya{sv}"),
  .reply("a{sa{sv}}as"),
  .reply("sossas"),
  .reply("va{sv}v"),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBusReader(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  // The reader picks come from the end of the input, so the messages keep their bytes.
  var picks = FuzzInput(bytes: input.bytes.reversed())
  checkCommonTypes(Array(input.bytes.prefix(5)))
  while let bytes = input.nextMessage(shapes: readerShapes) {
    guard let message = try? DBusMessage(wireBytes: bytes) else { continue }
    check(message, picks: &picks)
  }
  return 0
}

/// What a reader method read, to compare with the decoder's value.
private enum Read {
  case value(DBusValue)
  case properties([String: DBusValue])
  case interfaces([String: [String: DBusValue]])
  case visited(found: Bool, [(String, DBusValue)])
}

/// The reader methods, as the input picks them.
private enum Method: CaseIterable {
  case value, string, objectPath, strings, properties, interfacesAndProperties, visitProperties
}

private func check(_ message: DBusMessage, picks: inout FuzzInput) {
  let decoded = Result { () throws(DBusError) in try message.arguments() }
  let signature = message.signature.rawValue
  if verbose { print("\(signature): \(decoded)") }
  let types: [DBusType]
  do throws(DBusError) {
    types = signature.isEmpty ? [] : try DBusType.parseList(signature)
  } catch {
    fuzzCheck(false, "libdbus accepted a signature the parser refuses: \(signature)")
    return
  }
  let hasFD = signature.contains("h")

  // Every argument read with value(): the whole decode's values, or a refusal where it
  // refused.
  let walked = Result { () throws(DBusError) -> [DBusValue] in
    try message.read { reader throws(DBusError) in
      var values: [DBusValue] = []
      while !reader.isAtEnd { values.append(try reader.value()) }
      return values
    }
  }
  switch (decoded, walked) {
  case (.success(let values), .success(let read)):
    fuzzCheck(same(values, read), "value() read other values than the decoder: \(signature)")
  case (.success, .failure(let error)):
    fuzzCheck(false, "value() refused what the decoder read (\(signature)): \(error)")
  case (.failure, .success):
    fuzzCheck(false, "value() read what the decoder refused: \(signature)")
  case (.failure, .failure):
    break
  }
  guard case .success(let values) = decoded, !hasFD else { return }

  // The arguments again, each with the reader the input picks; after the first refusal the
  // reader's position is unspecified, so the pass ends there.
  let methods = types.map { _ in Method.allCases[Int(picks.byte()) % Method.allCases.count] }
  let wanted = picks.byte() % 2 == 0 ? "org.bluez.Device1" : firstKey(values)
  try? message.read { reader throws(DBusError) in
    for (index, method) in methods.enumerated() {
      let expected = expectation(method, values[index], interface: wanted)
      let read = Result { () throws(DBusError) in
        try readArgument(method, &reader, interface: wanted)
      }
      switch (expected, read) {
      case (nil, .success):
        fuzzCheck(false, "\(method) read an argument of type \(types[index].signature)")
      case (nil, .failure):
        return
      case (let expected?, .failure(let error)):
        fuzzCheck(false, "\(method) refused a \(types[index].signature) argument: \(error)")
        _ = expected
      case (let expected?, .success(let read)):
        fuzzCheck(
          same(expected, read),
          "\(method) read other than the decoder: \(types[index].signature)")
      }
    }
    fuzzCheck(reader.isAtEnd, "the reader is not at the end after every argument")
    // Rewound, the reader reads the same again.
    reader.rewind()
    var again: [DBusValue] = []
    while !reader.isAtEnd { again.append(try reader.value()) }
    fuzzCheck(same(values, again), "a rewound reader read other values")
  }

  checkDepth(message, types: types, values: values, picks: &picks)
}

/// Reads one argument with `method`.
private func readArgument(_ method: Method, _ reader: inout MessageReader, interface: String)
  throws(DBusError) -> Read
{
  switch method {
  case .value: return .value(try reader.value())
  case .string: return .value(.string(try reader.string()))
  case .objectPath: return .value(.objectPath(try reader.objectPath()))
  case .strings: return .value(.strings(try reader.strings()))
  case .properties: return .properties(try reader.properties())
  case .interfacesAndProperties: return .interfaces(try reader.interfacesAndProperties())
  case .visitProperties:
    var visited: [(String, DBusValue)] = []
    let found = try reader.visitProperties(of: interface) { visited.append(($0, $1)) }
    return .visited(found: found, visited)
  }
}

/// What `method` must read from an argument the decoder read as `value`; `nil` when the
/// method does not fit the argument's type (the reader must refuse).
private func expectation(_ method: Method, _ value: DBusValue, interface: String) -> Read? {
  let signature = value.signature.rawValue
  switch method {
  case .value:
    return .value(value)
  case .string:
    return signature == "s" ? .value(value) : nil
  case .objectPath:
    return signature == "o" ? .value(value) : nil
  case .strings:
    return signature == "as" ? .value(value) : nil
  case .properties:
    guard signature == "a{sv}" else { return nil }
    return .properties(value.stringVariantDictionary!)
  case .interfacesAndProperties:
    guard signature == "a{sa{sv}}" else { return nil }
    var result: [String: [String: DBusValue]] = [:]
    for entry in value.dictionaryValue! {
      result[entry.key.stringValue!] = entry.value.stringVariantDictionary!
    }
    return .interfaces(result)
  case .visitProperties:
    guard signature == "a{sa{sv}}" else { return nil }
    // The entry of that name, in the message's order; named twice, the visit refuses.
    var found = false
    var visited: [(String, DBusValue)] = []
    for entry in value.dictionaryValue! where entry.key.stringValue == interface {
      if found { return nil }
      found = true
      for property in entry.value.dictionaryValue! {
        visited.append((property.key.stringValue!, property.value.unwrapped))
      }
    }
    return .visited(found: found, visited)
  }
}

/// The key of the first interface of the first `a{sa{sv}}` argument, for visitProperties.
private func firstKey(_ values: [DBusValue]) -> String {
  for value in values where value.signature.rawValue == "a{sa{sv}}" {
    if let key = value.dictionaryValue?.first?.key.stringValue { return key }
  }
  return ""
}

/// WireBody reads an argument with `maximumDepth` equal to the containers its value is
/// nested in, and refuses it with one less.
private func checkDepth(
  _ message: DBusMessage, types: [DBusType], values: [DBusValue], picks: inout FuzzInput
) {
  guard !types.isEmpty else { return }
  let index = Int(picks.byte()) % types.count
  let needed = depth(values[index])
  for limit in needed > 0 ? [needed, needed - 1] : [needed] {
    let read = Result { () throws(DBusError) -> DBusValue in
      var body = try WireBody(message.raw)
      for type in types[..<index] { _ = try body.value(type) }
      body.maximumDepth = limit
      return try body.value(types[index])
    }
    switch read {
    case .success(let value):
      fuzzCheck(limit == needed, "WireBody read a value of depth \(needed) within \(limit)")
      fuzzCheck(same([values[index]], [value]), "WireBody read another value at its depth")
    case .failure(let error):
      fuzzCheck(limit < needed, "WireBody refused a value within its depth \(needed): \(error)")
    }
  }
}

/// How many containers deep WireBody reads `value`: an array, struct or variant counts one
/// (a dictionary's entries count with their array), a basic value none.
private func depth(_ value: DBusValue) -> Int {
  switch value {
  case .variant(let inner): return 1 + depth(inner)
  case .structure(let fields): return 1 + (fields.map(depth).max() ?? 0)
  case .array(_, let items): return 1 + (items.map(depth).max() ?? 0)
  case .bytes: return 1
  case .dictionary(_, _, let entries):
    return 1 + (entries.map { max(depth($0.key), depth($0.value)) }.max() ?? 0)
  default: return 0
  }
}

/// WireBody's table of common variant signatures gives what the parser gives.
private func checkCommonTypes(_ prefix: [UInt8]) {
  for length in 1...max(1, prefix.count) where length <= prefix.count {
    let bytes = Array(prefix[..<length])
    let common = bytes.withUnsafeBytes { WireBody.commonType($0) }
    guard let common else { continue }
    let parsed = try? DBusType.parseSingle(String(decoding: bytes, as: UTF8.self))
    fuzzCheck(
      parsed?.signature == common.signature,
      "commonType(\(bytes)) is \(common.signature), the parser says \(String(describing: parsed?.signature))"
    )
  }
}

// MARK: Comparing

/// Values compared by their descriptions, so that a NaN equals itself.
private func same(_ a: [DBusValue], _ b: [DBusValue]) -> Bool {
  a == b || String(reflecting: a) == String(reflecting: b)
}

private func same(_ a: [String: DBusValue], _ b: [String: DBusValue]) -> Bool {
  a.count == b.count && a.allSatisfy { key, value in b[key].map { same([value], [$0]) } ?? false }
}

private func same(_ expected: Read, _ read: Read) -> Bool {
  switch (expected, read) {
  case (.value(let a), .value(let b)): same([a], [b])
  case (.properties(let a), .properties(let b)): same(a, b)
  case (.interfaces(let a), .interfaces(let b)):
    a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
  case (.visited(let foundA, let a), .visited(let foundB, let b)):
    foundA == foundB && a.count == b.count
      && zip(a, b).allSatisfy { $0.0 == $1.0 && same([$0.1], [$1.1]) }
  default: false
  }
}
