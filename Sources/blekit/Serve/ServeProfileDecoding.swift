// Reading a `blekit serve` profile from JSON: every mistake reported with the path inside the
// file (`services[0].characteristics[1].uuid`) and the reason, before anything is registered.

import ArgumentParsing
import BLEKit
import JSON

/// Why a profile was refused: `FILE: PATH: REASON` on one line, exit status 2.
struct ProfileError: Error, Equatable, CustomStringConvertible, ExitStatusError {
  /// The file as named on the command line.
  var file: String
  /// Where in the file: a JSON path (`services[0].uuid`) or `line L, column C`.
  var path: String
  var reason: String

  /// The line, through ``TerminalText/visible(_:)``: the path and the reason quote the file's
  /// keys and values, which may hold controls (`"\u001b[2J"` is a valid key).
  var description: String {
    TerminalText.visible(path.isEmpty ? "\(file): \(reason)" : "\(file): \(path): \(reason)")
  }
  var exitStatus: ExitStatus { .usage }
  var exitMessage: String { description }
}

extension ServeProfile {
  /// How deep a profile may nest: 64 levels (the schema uses 5).
  static let maximumDepth = 64

  /// Decodes and checks a profile; `file` names it in errors.
  static func decode(_ bytes: [UInt8], file: String) throws(ProfileError) -> ServeProfile {
    let json: JSONValue
    do {
      json = try JSONValue.parse(bytes, maximumDepth: maximumDepth)
    } catch {
      throw ProfileError(
        file: file, path: "line \(error.line), column \(error.column)",
        reason: "not valid JSON: \(error.reason)")
    }
    do {
      return try ProfileDecoder().profile(json)
    } catch {
      throw ProfileError(file: file, path: error.path, reason: error.reason)
    }
  }
}

/// A mistake at a path inside the document.
struct ProfileIssue: Error {
  var path: String
  var reason: String
}

/// The schema (docs/serve.md), one method per kind of object.
struct ProfileDecoder {
  /// The most values a cycle holds: 1024 (what `clone --listen` records per characteristic).
  static let maximumCycleLength = 1024
  // MARK: - Objects

  func profile(_ json: JSONValue) throws(ProfileIssue) -> ServeProfile {
    let root = try object(json, at: "", keys: ["services", "advertise", "notes"])
    let servicesJSON = try array(required(root, "services", at: ""), at: "services")
    guard !servicesJSON.isEmpty else {
      throw ProfileIssue(path: "services", reason: "no services: give at least one")
    }
    var services: [ServeProfile.Service] = []
    for (i, service) in servicesJSON.enumerated() {
      services.append(try self.service(service, at: "services[\(i)]"))
    }
    let stdinUsers = services.flatMap(\.characteristics).filter {
      if case .standardInput = $0.notifier { return true }
      return false
    }
    if stdinUsers.count > 1 {
      throw ProfileIssue(
        path: "\(stdinUsers[1].path).notifier",
        reason: "standard input already feeds \(stdinUsers[0].path); only one notifier can read it")
    }
    let advertisement = try self.advertisement(root["advertise"], services: services)
    return ServeProfile(services: services, advertisement: advertisement)
  }

  func service(_ json: JSONValue, at path: String) throws(ProfileIssue) -> ServeProfile.Service {
    let fields = try object(json, at: path, keys: ["uuid", "primary", "characteristics", "name"])
    let uuid = try self.uuid(required(fields, "uuid", at: path), at: "\(path).uuid")
    let primary = try fields["primary"].map { json throws(ProfileIssue) in
      try bool(json, at: "\(path).primary")
    }
    let list = try array(
      required(fields, "characteristics", at: path), at: "\(path).characteristics")
    guard !list.isEmpty else {
      throw ProfileIssue(
        path: "\(path).characteristics", reason: "no characteristics: give at least one")
    }
    var characteristics: [ServeProfile.Characteristic] = []
    for (j, item) in list.enumerated() {
      characteristics.append(try characteristic(item, at: "\(path).characteristics[\(j)]"))
    }
    return ServeProfile.Service(
      uuid: uuid, primary: primary ?? true, characteristics: characteristics)
  }

  func characteristic(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> ServeProfile.Characteristic
  {
    let fields = try object(
      json, at: path,
      keys: [
        "uuid", "name", "properties", "permissions", "value", "notifier", "writes",
        "description", "format", "descriptors", "readError", "note",
      ])
    let uuid = try self.uuid(required(fields, "uuid", at: path), at: "\(path).uuid")
    let properties = try self.properties(
      required(fields, "properties", at: path), at: "\(path).properties")
    let writable = properties.contains(.write) || properties.contains(.writeWithoutResponse)
    let permissions = try fields["permissions"].map { json throws(ProfileIssue) in
      try self.permissions(json, at: "\(path).permissions")
    }

    var readError: ServeProfile.ReadError?
    if let json = fields["readError"] {
      guard properties.contains(.read) else {
        throw ProfileIssue(
          path: "\(path).readError",
          reason: "a read error is for reads, and 'properties' has no \"read\"")
      }
      readError = try self.readError(json, at: "\(path).readError")
    }
    var value: ServeProfile.ValueSource?
    if let json = fields["value"] {
      guard properties.contains(.read) else {
        throw ProfileIssue(
          path: "\(path).value", reason: "a value is for reads, and 'properties' has no \"read\"")
      }
      guard readError == nil else {
        throw ProfileIssue(
          path: "\(path).value", reason: "give a value or a readError, not both")
      }
      value = try valueSource(json, at: "\(path).value")
    } else if properties.contains(.read) && readError == nil {
      throw ProfileIssue(
        path: "\(path).value",
        reason: "missing: a readable characteristic needs a value (or a readError)")
    }

    var notifier: ServeProfile.Notifier?
    let notifies = properties.contains(.notify) || properties.contains(.indicate)
    if let json = fields["notifier"] {
      guard notifies else {
        throw ProfileIssue(
          path: "\(path).notifier",
          reason: "'properties' has neither \"notify\" nor \"indicate\"")
      }
      notifier = try self.notifier(json, at: "\(path).notifier")
    } else if notifies {
      throw ProfileIssue(
        path: "\(path).notifier",
        reason: "missing: a notify or indicate characteristic needs a notifier "
          + "(periodic or stdin)")
    }

    var writes = ServeProfile.WriteOutput.print
    if let json = fields["writes"] {
      guard writable else {
        throw ProfileIssue(
          path: "\(path).writes",
          reason: "'properties' has neither \"write\" nor \"write-without-response\"")
      }
      let text = try string(json, at: "\(path).writes")
      guard let output = ServeProfile.WriteOutput(rawValue: text) else {
        throw ProfileIssue(
          path: "\(path).writes", reason: "'\(text)' is not one of print, stdout, ignore")
      }
      writes = output
    }

    var descriptors: [ServeProfile.Descriptor] = []
    if let json = fields["description"] {
      let text = try string(json, at: "\(path).description")
      try checkLength(text.utf8.count, at: "\(path).description")
      descriptors.append(
        ServeProfile.Descriptor(
          uuid: BluetoothUUID(uint16: 0x2901), value: Array(text.utf8), writable: false))
    }
    if let json = fields["format"] {
      let format = try presentationFormat(json, at: "\(path).format")
      descriptors.append(
        ServeProfile.Descriptor(
          uuid: BluetoothUUID(uint16: 0x2904), value: format.bytes, writable: false))
    }
    if let json = fields["descriptors"] {
      for (k, item) in try array(json, at: "\(path).descriptors").enumerated() {
        let at = "\(path).descriptors[\(k)]"
        let descriptor = try self.descriptor(item, at: at)
        if descriptors.contains(where: { $0.uuid == descriptor.uuid }) {
          throw ProfileIssue(
            path: "\(at).uuid",
            reason: "descriptor \(descriptor.uuid.shortString) is already given")
        }
        descriptors.append(descriptor)
      }
    }
    return ServeProfile.Characteristic(
      uuid: uuid, properties: properties, permissions: permissions ?? [], value: value,
      readError: readError, notifier: notifier, writes: writes, descriptors: descriptors, path: path
    )
  }

  func descriptor(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> ServeProfile.Descriptor
  {
    let fields = try object(json, at: path, keys: ["uuid", "value", "writable", "note"])
    let uuid = try self.uuid(required(fields, "uuid", at: path), at: "\(path).uuid")
    if uuid == BluetoothUUID(uint16: 0x2902) || uuid == BluetoothUUID(uint16: 0x2900) {
      throw ProfileIssue(
        path: "\(path).uuid",
        reason: "BlueZ adds descriptor \(uuid.shortString) itself; leave it out")
    }
    let source = try valueSource(required(fields, "value", at: path), at: "\(path).value")
    guard case .fixed(let bytes) = source else {
      throw ProfileIssue(
        path: "\(path).value", reason: "a descriptor's value is fixed (text, hex or a number)")
    }
    let writable = try fields["writable"].map { json throws(ProfileIssue) in
      try bool(json, at: "\(path).writable")
    }
    return ServeProfile.Descriptor(uuid: uuid, value: bytes, writable: writable ?? false)
  }

  func advertisement(_ json: JSONValue?, services: [ServeProfile.Service]) throws(ProfileIssue)
    -> ServeProfile.Advertisement
  {
    let primary = services.first(where: \.primary)?.uuid ?? services[0].uuid
    guard let json else {
      return ServeProfile.Advertisement(name: nil, services: [primary], appearance: nil)
    }
    let fields = try object(
      json, at: "advertise",
      keys: ["name", "services", "appearance", "manufacturerData", "serviceData"])
    let name = try fields["name"].map { json throws(ProfileIssue) in
      try string(json, at: "advertise.name")
    }
    var uuids = [primary]
    if let list = fields["services"] {
      uuids = []
      for (i, item) in try array(list, at: "advertise.services").enumerated() {
        uuids.append(try uuid(item, at: "advertise.services[\(i)]"))
      }
    }
    let appearance = try fields["appearance"].map { json throws(ProfileIssue) in
      UInt16(try integer(json, at: "advertise.appearance", in: 0...0xFFFF))
    }
    var manufacturerData: [UInt16: [UInt8]] = [:]
    if let json = fields["manufacturerData"] {
      for field in try object(json, at: "advertise.manufacturerData", keys: nil).members {
        let (key, value) = (field.key, field.value)
        let at = "advertise.manufacturerData.\(key)"
        guard key.count == 4, let company = UInt16(key, radix: 16) else {
          throw ProfileIssue(
            path: at, reason: "'\(key)' is not a company identifier (4 hex digits, e.g. 004c)")
        }
        manufacturerData[company] = try hexString(value, at: at)
      }
    }
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
    if let json = fields["serviceData"] {
      for field in try object(json, at: "advertise.serviceData", keys: nil).members {
        let (key, value) = (field.key, field.value)
        let at = "advertise.serviceData.\(key)"
        serviceData[try uuid(.string(key), at: at)] = try hexString(value, at: at)
      }
    }
    let advertisement = ServeProfile.Advertisement(
      name: name, services: uuids, appearance: appearance, manufacturerData: manufacturerData,
      serviceData: serviceData)
    do {
      _ = try advertisement.payload.validateLegacySize()
    } catch {
      throw ProfileIssue(path: "advertise", reason: error.description)
    }
    return advertisement
  }

  // MARK: - Values

  /// `{"text": ..}`, `{"hex": ..}`, `{"uint8"|"uint16"|"uint32"|"sint8"|"sint16"|"sint32": n}`,
  /// `{"file": PATH}`, `{"command": SHELL}`, `{"counter": {..}}`, or a plain string (text).
  func valueSource(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> ServeProfile.ValueSource
  {
    if case .string(let text) = json {
      try checkLength(text.utf8.count, at: path)
      return .fixed(Array(text.utf8))
    }
    let fields = try object(
      json, at: path,
      keys: [
        "text", "hex", "uint8", "uint16", "uint32", "sint8", "sint16", "sint32", "file",
        "command", "counter", "cycle",
      ])
    guard fields.count == 1, let only = fields.first else {
      throw ProfileIssue(
        path: path,
        reason: fields.isEmpty
          ? "empty: give one of text, hex, uint8..sint32, file, command, counter, cycle"
          : "give one source, not \(fields.count) (\(fields.map(\.key).joined(separator: ", ")))"
      )
    }
    let (key, value) = (only.key, only.value)
    let at = "\(path).\(key)"
    switch key {
    case "text":
      let text = try string(value, at: at)
      try checkLength(text.utf8.count, at: at)
      return .fixed(Array(text.utf8))
    case "hex":
      let text = try string(value, at: at)
      let bytes: [UInt8]
      do {
        bytes = try HexBytes.parse(text)
      } catch {
        throw ProfileIssue(path: at, reason: error.description)
      }
      try checkLength(bytes.count, at: at)
      return .fixed(bytes)
    case "uint8": return .fixed(littleEndian(try integer(value, at: at, in: 0...0xFF), width: 1))
    case "uint16":
      return .fixed(littleEndian(try integer(value, at: at, in: 0...0xFFFF), width: 2))
    case "uint32":
      return .fixed(littleEndian(try integer(value, at: at, in: 0...0xFFFF_FFFF), width: 4))
    case "sint8":
      return .fixed(littleEndian(try integer(value, at: at, in: -0x80...0x7F), width: 1))
    case "sint16":
      return .fixed(littleEndian(try integer(value, at: at, in: -0x8000...0x7FFF), width: 2))
    case "sint32":
      return .fixed(
        littleEndian(try integer(value, at: at, in: -0x8000_0000...0x7FFF_FFFF), width: 4))
    case "file":
      let file = try string(value, at: at)
      guard !file.isEmpty else { throw ProfileIssue(path: at, reason: "empty file name") }
      return .file(file)
    case "command":
      let command = try string(value, at: at)
      guard !command.isEmpty else { throw ProfileIssue(path: at, reason: "empty command") }
      return .command(command)
    case "cycle":
      let items = try array(value, at: at)
      guard !items.isEmpty else {
        throw ProfileIssue(path: at, reason: "no values: give one or more")
      }
      guard items.count <= Self.maximumCycleLength else {
        throw ProfileIssue(
          path: at,
          reason: "\(items.count) values; a cycle holds at most \(Self.maximumCycleLength)")
      }
      var values: [[UInt8]] = []
      for (i, item) in items.enumerated() {
        guard case .fixed(let bytes) = try valueSource(item, at: "\(at)[\(i)]") else {
          throw ProfileIssue(
            path: "\(at)[\(i)]", reason: "a cycle's values are fixed (text, hex or a number)")
        }
        values.append(bytes)
      }
      return .cycle(values)
    default:
      return .counter(try counter(value, at: at))
    }
  }

  func counter(_ json: JSONValue, at path: String) throws(ProfileIssue) -> ServeProfile.Counter {
    let fields = try object(json, at: path, keys: ["from", "to", "step", "width", "prefix"])
    let width =
      try fields["width"].map { json throws(ProfileIssue) in
        Int(try integer(json, at: "\(path).width", in: 1...4))
      } ?? 1
    guard width != 3 else {
      throw ProfileIssue(path: "\(path).width", reason: "3 is not 1, 2 or 4 bytes")
    }
    let maximum = width == 4 ? Int64(UInt32.max) : (Int64(1) << (8 * width)) - 1
    let from =
      try fields["from"].map { json throws(ProfileIssue) in
        try integer(json, at: "\(path).from", in: 0...maximum)
      } ?? 0
    let to =
      try fields["to"].map { json throws(ProfileIssue) in
        try integer(json, at: "\(path).to", in: 0...maximum)
      } ?? maximum
    let step =
      try fields["step"].map { json throws(ProfileIssue) in
        try integer(json, at: "\(path).step", in: -maximum...maximum)
      } ?? 1
    guard step != 0 else { throw ProfileIssue(path: "\(path).step", reason: "0 never counts") }
    guard step > 0 ? from <= to : from >= to else {
      throw ProfileIssue(
        path: "\(path).to",
        reason: "\(to) is never reached from \(from) in steps of \(step)")
    }
    var prefix: [UInt8] = []
    if let json = fields["prefix"] {
      let text = try string(json, at: "\(path).prefix")
      do {
        prefix = try HexBytes.parse(text)
      } catch {
        throw ProfileIssue(path: "\(path).prefix", reason: error.description)
      }
      try checkLength(prefix.count + width, at: "\(path).prefix")
    }
    return ServeProfile.Counter(from: from, to: to, step: step, width: width, prefix: prefix)
  }

  func notifier(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> ServeProfile.Notifier
  {
    let fields = try object(json, at: path, keys: ["every", "value", "stdin"])
    if let stdin = fields["stdin"] {
      guard fields.count == 1 else {
        throw ProfileIssue(path: path, reason: "give either stdin or every and value, not both")
      }
      let text = try string(stdin, at: "\(path).stdin")
      guard let format = ServeProfile.LineFormat(rawValue: text) else {
        throw ProfileIssue(path: "\(path).stdin", reason: "'\(text)' is not text or hex")
      }
      return .standardInput(format)
    }
    guard let every = fields["every"] else {
      throw ProfileIssue(
        path: path, reason: "give \"every\": SECONDS with a \"value\", or \"stdin\": \"text\"")
    }
    let seconds = try number(every, at: "\(path).every")
    guard seconds >= 0.01, seconds <= 3600 else {
      throw ProfileIssue(
        path: "\(path).every", reason: "\(seconds) is not between 0.01 and 3600 seconds")
    }
    let value = try valueSource(required(fields, "value", at: path), at: "\(path).value")
    return .periodic(interval: .milliseconds(Int64((seconds * 1000).rounded())), value: value)
  }

  func properties(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> CharacteristicProperties
  {
    let names: [(String, CharacteristicProperties)] = [
      ("read", .read), ("write", .write), ("write-without-response", .writeWithoutResponse),
      ("notify", .notify), ("indicate", .indicate),
    ]
    var properties: CharacteristicProperties = []
    let list = try array(json, at: path)
    for (i, item) in list.enumerated() {
      let name = try string(item, at: "\(path)[\(i)]")
      guard let property = names.first(where: { $0.0 == name })?.1 else {
        throw ProfileIssue(
          path: "\(path)[\(i)]",
          reason: "'\(name)' is not one of \(names.map(\.0).joined(separator: ", "))")
      }
      properties.insert(property)
    }
    guard !properties.isEmpty else {
      throw ProfileIssue(path: path, reason: "empty: a characteristic needs at least one")
    }
    return properties
  }

  func permissions(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> AttributePermissions
  {
    let names: [(String, AttributePermissions)] = [
      ("encrypt-read", .readEncryptionRequired), ("encrypt-write", .writeEncryptionRequired),
      ("encrypt-authenticated-read", .readAuthenticationRequired),
      ("encrypt-authenticated-write", .writeAuthenticationRequired),
      ("secure-read", .readSecureConnectionsRequired),
      ("secure-write", .writeSecureConnectionsRequired),
    ]
    var permissions: AttributePermissions = []
    for (i, item) in try array(json, at: path).enumerated() {
      let name = try string(item, at: "\(path)[\(i)]")
      guard let permission = names.first(where: { $0.0 == name })?.1 else {
        throw ProfileIssue(
          path: "\(path)[\(i)]",
          reason: "'\(name)' is not one of \(names.map(\.0).joined(separator: ", "))")
      }
      permissions.insert(permission)
    }
    return permissions
  }

  func presentationFormat(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> PresentationFormat
  {
    let fields = try object(json, at: path, keys: ["type", "exponent", "unit", "description"])
    let formats: [(String, UInt8)] = [
      ("boolean", PresentationFormat.boolean), ("uint8", PresentationFormat.uint8),
      ("uint16", PresentationFormat.uint16), ("uint32", PresentationFormat.uint32),
      ("sint8", PresentationFormat.sint8), ("sint16", PresentationFormat.sint16),
      ("sint32", PresentationFormat.sint32), ("float32", PresentationFormat.float32),
      ("utf8", PresentationFormat.utf8), ("opaque", PresentationFormat.opaque),
    ]
    let name = try string(required(fields, "type", at: path), at: "\(path).type")
    guard let format = formats.first(where: { $0.0 == name })?.1 else {
      throw ProfileIssue(
        path: "\(path).type",
        reason: "'\(name)' is not one of \(formats.map(\.0).joined(separator: ", "))")
    }
    let exponent = try fields["exponent"].map { json throws(ProfileIssue) in
      Int8(try integer(json, at: "\(path).exponent", in: -128...127))
    }
    var unit: UInt16 = 0x2700
    if let json = fields["unit"] {
      let parsed = try uuid(json, at: "\(path).unit")
      guard let short = parsed.uint16Value else {
        throw ProfileIssue(path: "\(path).unit", reason: "a unit is a 16-bit UUID, e.g. 27ad")
      }
      unit = short
    }
    let description = try fields["description"].map { json throws(ProfileIssue) in
      UInt16(try integer(json, at: "\(path).description", in: 0...0xFFFF))
    }
    return PresentationFormat(
      format: format, exponent: exponent ?? 0, unit: unit, formatDescription: description ?? 0)
  }

  // MARK: - Scalars

  /// An object whose keys are all among `keys` (any key when `keys` is nil).
  func object(_ json: JSONValue, at path: String, keys: [String]?) throws(ProfileIssue)
    -> Fields
  {
    guard case .object(let fields) = json else {
      throw ProfileIssue(path: path, reason: "expected an object, found \(json.kind)")
    }
    guard let keys else { return Fields(fields) }
    for field in fields where !keys.contains(field.key) {
      throw ProfileIssue(
        path: path.isEmpty ? field.key : "\(path).\(field.key)",
        reason: "unknown key (known here: \(keys.joined(separator: ", ")))")
    }
    return Fields(fields)
  }

  func required(_ fields: Fields, _ key: String, at path: String) throws(ProfileIssue)
    -> JSONValue
  {
    guard let value = fields[key] else {
      throw ProfileIssue(path: path.isEmpty ? key : "\(path).\(key)", reason: "missing")
    }
    return value
  }

  func array(_ json: JSONValue, at path: String) throws(ProfileIssue) -> [JSONValue] {
    guard case .array(let items) = json else {
      throw ProfileIssue(path: path, reason: "expected an array, found \(json.kind)")
    }
    return items
  }

  func string(_ json: JSONValue, at path: String) throws(ProfileIssue) -> String {
    guard case .string(let text) = json else {
      throw ProfileIssue(path: path, reason: "expected a string, found \(json.kind)")
    }
    return text
  }

  func bool(_ json: JSONValue, at path: String) throws(ProfileIssue) -> Bool {
    guard case .bool(let flag) = json else {
      throw ProfileIssue(path: path, reason: "expected true or false, found \(json.kind)")
    }
    return flag
  }

  func number(_ json: JSONValue, at path: String) throws(ProfileIssue) -> Double {
    guard let value = json.doubleValue else {
      throw ProfileIssue(path: path, reason: "expected a number, found \(json.kind)")
    }
    return value
  }

  func integer(_ json: JSONValue, at path: String, in range: ClosedRange<Int64>)
    throws(ProfileIssue) -> Int64
  {
    let value: Int64
    switch json {
    case .int(let whole): value = Int64(whole)
    case .number(let number) where number == number.rounded():
      // Whole but not an `Int`: beyond 64 bits, or written with a fraction or an exponent.
      throw ProfileIssue(
        path: path,
        reason: abs(number) >= 0x1p63
          ? "\(number) is out of range (\(range.lowerBound)...\(range.upperBound))"
          : "\(number) is not an integer (write it without a fraction or an exponent)")
    case .number(let number):
      throw ProfileIssue(path: path, reason: "\(number) is not an integer")
    default:
      throw ProfileIssue(path: path, reason: "expected an integer, found \(json.kind)")
    }
    guard range.contains(value) else {
      throw ProfileIssue(
        path: path, reason: "\(value) is out of range (\(range.lowerBound)...\(range.upperBound))")
    }
    return value
  }

  func uuid(_ json: JSONValue, at path: String) throws(ProfileIssue) -> BluetoothUUID {
    let text = try string(json, at: path)
    do {
      return try BluetoothUUID(text)
    } catch {
      throw ProfileIssue(
        path: path,
        reason: "'\(text)' is not a UUID (16-bit like 2a37, or 128-bit like "
          + "6e400001-b5a3-f393-e0a9-e50e24dcca9e)")
    }
  }

  /// A string of hex digits (spaces allowed) as bytes, at most 512.
  func hexString(_ json: JSONValue, at path: String) throws(ProfileIssue) -> [UInt8] {
    let text = try string(json, at: path)
    let bytes: [UInt8]
    do {
      bytes = try HexBytes.parse(text)
    } catch {
      throw ProfileIssue(path: path, reason: error.description)
    }
    try checkLength(bytes.count, at: path)
    return bytes
  }

  /// `insufficient-encryption` and the other named ATT errors, or an ATT code (`0x80`).
  func readError(_ json: JSONValue, at path: String) throws(ProfileIssue)
    -> ServeProfile.ReadError
  {
    let text = try string(json, at: path)
    if let (_, error) = ServeProfile.ReadError.names.first(where: { $0.0 == text }) {
      return error
    }
    if text.hasPrefix("0x"), text.count == 4, let code = UInt8(text.dropFirst(2), radix: 16),
      code != 0
    {
      return ServeProfile.ReadError(code: code)
    }
    throw ProfileIssue(
      path: path,
      reason: "'\(text)' is not one of "
        + ServeProfile.ReadError.names.map(\.0).joined(separator: ", ")
        + ", or an ATT error code like 0x80")
  }

  func checkLength(_ count: Int, at path: String) throws(ProfileIssue) {
    guard count <= ServeProfile.maximumValueLength else {
      throw ProfileIssue(
        path: path, reason: "\(count) bytes; an attribute value holds at most 512")
    }
  }

  func littleEndian(_ value: Int64, width: Int) -> [UInt8] {
    (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
  }

  /// An object's members by key, in file order.
  struct Fields {
    let members: [JSONValue.Field]
    init(_ members: [JSONValue.Field]) { self.members = members }
    subscript(key: String) -> JSONValue? { members.first { $0.key == key }?.value }
    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }
    var first: JSONValue.Field? { members.first }
    func map<T>(_ body: (JSONValue.Field) -> T) -> [T] { members.map(body) }
  }
}

extension JSONValue {
  /// What the value is, for messages ("a string", "an object").
  var kind: String {
    switch self {
    case .string: "a string"
    case .number, .int: "a number"
    case .bool: "a boolean"
    case .null: "null"
    case .array: "an array"
    case .object: "an object"
    }
  }
}

extension ServeProfile.Advertisement {
  /// The advertising payload: general discoverable, connectable.
  var payload: AdvertisingPayload {
    AdvertisingPayload(
      discoverable: true, serviceUUIDs: services, manufacturerData: manufacturerData,
      serviceData: serviceData, localName: name, appearance: appearance)
  }
}
