// libFuzzer target: the BlueZ layer's readers of what bluetoothd sends. The input is a sequence
// of messages (raw, as dbus-monitor --binary writes them, or a body under one of bluetoothd's
// shapes; see fuzz/support/FuzzMessages.swift), each validated by libdbus. Each message goes
// to ObjectManagerSignal (checked against the same signal decoded whole), to the managed-objects
// decoder (checked against the signal reader on the same objects), to Agent1's request decoding
// and to the GATT request options. The signals are then replayed on a scratch BlueZObjectTree
// (BlueZObjectTree.replay, which reads them with the tree's own `take`), whose events and
// new devices (DeviceAdvertisement, through its collector) must match a model of the tree
// built from the decoded signals. Built by scripts/fuzz.
import DBus

#if canImport(Glibc)
  import Glibc
#endif

private let objectManager = "org.freedesktop.DBus.ObjectManager"
private let properties = "org.freedesktop.DBus.Properties"
private let agent = "org.bluez.Agent1"
private let characteristic = "org.bluez.GattCharacteristic1"
private let device = "/org/bluez/hci0/dev_00_AA_01_01_00_01"

/// What bluetoothd sends: ObjectManager and Properties signals, GetManagedObjects' reply,
/// Agent1 calls and GATT calls.
let bluezShapes: [MessageShape] = [
  .signal(objectManager, "InterfacesAdded", "oa{sa{sv}}", path: "/"),
  .signal(objectManager, "InterfacesRemoved", "oas", path: "/"),
  .signal(properties, "PropertiesChanged", "sa{sv}as", path: device),
  .reply("a{oa{sa{sv}}}"),
  .call(agent, "RequestPinCode", "o", path: "/blekit/agent"),
  .call(agent, "DisplayPinCode", "os", path: "/blekit/agent"),
  .call(agent, "RequestPasskey", "o", path: "/blekit/agent"),
  .call(agent, "DisplayPasskey", "ouq", path: "/blekit/agent"),
  .call(agent, "RequestConfirmation", "ou", path: "/blekit/agent"),
  .call(agent, "RequestAuthorization", "o", path: "/blekit/agent"),
  .call(agent, "AuthorizeService", "os", path: "/blekit/agent"),
  .call(characteristic, "ReadValue", "a{sv}", path: "/blekit/app/service0/char0"),
  .call(characteristic, "WriteValue", "aya{sv}", path: "/blekit/app/service0/char0"),
  .call(characteristic, "AcquireNotify", "a{sv}", path: "/blekit/app/service0/char0"),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBlueZReaders(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  var signals: [DBusMessage] = []
  var expected: [ObjectManagerSignal] = []
  var announcements: [(ObjectPath, DeviceAdvertisement?)] = []
  while let bytes = input.nextMessage(shapes: bluezShapes) {
    guard let message = try? DBusMessage(wireBytes: bytes),
      let arguments = try? message.arguments()
    else { continue }
    checkManagedObjects(arguments)
    checkAgentRequest(message, arguments)
    checkGattOptions(arguments)
    guard message.kind == .signal, let header = header(of: message) else { continue }
    let read = try? message.read { reader throws(DBusError) in
      ObjectManagerSignal(header, &reader)
    }
    let decoded = decodeSignal(header, arguments)
    fuzzCheck(
      same(read ?? nil, decoded),
      "ObjectManagerSignal read \(String(describing: read)), the decoder \(String(describing: decoded))"
    )
    signals.append(message)
    if let decoded { expected.append(decoded) }
    if case .interfacesAdded(let path, let added)? = decoded, !added.isEmpty,
      let device = added["org.bluez.Device1"]
    {
      // The tree hands a new device over once it holds it, as it holds it.
      announcements.append((path, DeviceAdvertisement(device)))
    }
  }
  checkRehearsal(signals, expected: expected, announcements: announcements)
  return 0
}

private func header(of message: DBusMessage) -> SignalHeader? {
  guard let path = message.path, let interface = message.interface, let member = message.member
  else { return nil }
  return SignalHeader(sender: message.sender, path: path, interface: interface, member: member)
}

// MARK: Signals

/// The signal as the tree must read it, from the whole decoded body.
private func decodeSignal(_ header: SignalHeader, _ arguments: [DBusValue])
  -> ObjectManagerSignal?
{
  let signature = arguments.map(\.signature.rawValue)
  switch (header.interface.rawValue, header.member.rawValue) {
  case (objectManager, "InterfacesAdded"):
    guard signature == ["o", "a{sa{sv}}"] else { return nil }
    return .interfacesAdded(
      arguments[0].objectPathValue!, BlueZObjectTree.decodeInterfaces(arguments[1]))
  case (objectManager, "InterfacesRemoved"):
    guard signature == ["o", "as"] else { return nil }
    return .interfacesRemoved(
      arguments[0].objectPathValue!,
      arguments[1].stringArrayValue!.compactMap { InterfaceName(rawValue: $0) })
  case (properties, "PropertiesChanged"):
    // The invalidated names are optional; anything after them is ignored.
    guard signature.count >= 2, signature[0] == "s", signature[1] == "a{sv}",
      let interface = InterfaceName(rawValue: arguments[0].stringValue!)
    else { return nil }
    let invalidated =
      signature.count > 2 && signature[2] == "as" ? arguments[2].stringArrayValue! : []
    return .propertiesChanged(
      header.path, interface, changed: arguments[1].stringVariantDictionary!,
      invalidated: invalidated)
  default:
    return nil
  }
}

/// Replays `messages` on a scratch tree and checks its events and announcements against a
/// model of the tree applying `expected`.
private func checkRehearsal(
  _ messages: [DBusMessage], expected: [ObjectManagerSignal],
  announcements: [(ObjectPath, DeviceAdvertisement?)]
) {
  guard !messages.isEmpty else { return }
  let announced = Announcements()
  let events = BlueZObjectTree.replay(messages) { path, advertisement in
    announced.append(path, advertisement)
  }
  let heard = announced.list
  fuzzCheck(
    heard.count == announcements.count
      && zip(heard, announcements).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 },
    "announced \(heard), expected \(announcements)")
  // The same device, read whole from the tree's copy of the signal, is what was announced:
  // the fast path and the dictionary agree.
  var index = 0
  for signal in expected {
    guard case .interfacesAdded(_, let added) = signal, let device = added["org.bluez.Device1"]
    else { continue }
    while index < heard.count, heard[index].1 != DeviceAdvertisement(device) { index += 1 }
    fuzzCheck(
      index < heard.count,
      "no announced device matches the tree's Device1 properties \(device)")
  }

  // The model: the tree's objects after each signal, and the events it must emit (new devices
  // go to the announcements instead).
  var objects: BlueZObjects = [:]
  var wanted: [BlueZObjectEvent] = []
  for signal in expected {
    switch signal {
    case .interfacesAdded(let path, let added):
      guard !added.isEmpty else { continue }
      objects[path, default: [:]].merge(added) { _, new in new }
      if added["org.bluez.Device1"] == nil { wanted.append(.interfacesAdded(path, added)) }
    case .interfacesRemoved(let path, let removed):
      guard var interfaces = objects[path] else { continue }
      for name in removed { interfaces[name] = nil }
      objects[path] = interfaces.isEmpty ? nil : interfaces
      wanted.append(.interfacesRemoved(path, removed))
    case .propertiesChanged(let path, let interface, let changed, let invalidated):
      guard var current = objects[path]?[interface] else { continue }
      current.merge(changed) { _, new in new }
      for name in invalidated { current[name] = nil }
      objects[path]![interface] = current
      wanted.append(
        .propertiesChanged(
          path, interface, changed: changed, invalidated: invalidated, current: current))
    }
  }
  fuzzCheck(
    events.count == wanted.count && zip(events, wanted).allSatisfy(same),
    "the replay emitted \(events.count) events, the model \(wanted.count)")
}

/// The announcements a replay makes (its handler is @Sendable).
private final class Announcements: @unchecked Sendable {
  var list: [(ObjectPath, DeviceAdvertisement?)] = []
  func append(_ path: ObjectPath, _ advertisement: DeviceAdvertisement?) {
    list.append((path, advertisement))
  }
}

// MARK: GetManagedObjects

/// decodeManagedObjects on each argument; for an `a{oa{sa{sv}}}`, each object it keeps must be
/// what ObjectManagerSignal reads from an InterfacesAdded of that object's entry (the last one
/// of its path), and an object without a valid interface is left out.
private func checkManagedObjects(_ arguments: [DBusValue]) {
  for argument in arguments {
    let objects = BlueZObjectTree.decodeManagedObjects(argument)
    guard argument.signature == "a{oa{sa{sv}}}" else {
      fuzzCheck(objects.isEmpty, "managed objects decoded from a \(argument.signature)")
      continue
    }
    var last: [ObjectPath: DBusValue] = [:]
    for entry in argument.dictionaryValue! { last[entry.key.objectPathValue!] = entry.value }
    for (path, interfaces) in last {
      guard
        let message = try? DBusMessage.signal(
          path: "/", interface: InterfaceName(rawValue: objectManager)!,
          member: "InterfacesAdded"),
        (try? message.append([.objectPath(path), interfaces])) != nil,
        let header = header(of: message)
      else {
        fuzzCheck(false, "an InterfacesAdded for \(path) could not be built")
        continue
      }
      let read = try? message.read { reader throws(DBusError) in
        ObjectManagerSignal(header, &reader)
      }
      guard case .interfacesAdded(let readPath, let added)? = read ?? nil else {
        fuzzCheck(false, "ObjectManagerSignal refused an object of GetManagedObjects")
        continue
      }
      fuzzCheck(readPath == path, "InterfacesAdded read another path")
      if added.isEmpty {
        fuzzCheck(objects[path] == nil, "an object without interfaces was kept: \(path)")
      } else {
        fuzzCheck(
          objects[path].map { same($0, added) } ?? false,
          "decodeManagedObjects and InterfacesAdded disagree on \(path)")
      }
    }
    fuzzCheck(objects.count <= last.count, "more objects than paths")
  }
}

// MARK: Agent1

private let agentMembers = [
  "RequestPinCode", "DisplayPinCode", "RequestPasskey", "DisplayPasskey", "RequestConfirmation",
  "RequestAuthorization", "AuthorizeService",
]

/// Agent1.request on the call's member (or each of Agent1's members, for other messages), and
/// the reply to an answer made from the arguments.
private func checkAgentRequest(_ message: DBusMessage, _ arguments: [DBusValue]) {
  let members =
    message.kind == .methodCall ? [message.member?.rawValue ?? ""] : agentMembers
  for member in members {
    let request = Agent1.request(member: member, arguments: arguments)
    let method = Agent1.methods.first { $0.name.rawValue == member }
    let fits =
      method.map { $0.input.rawValue == arguments.map(\.signature.rawValue).joined() } ?? false
    // A call as bluetoothd makes it (the DBus layer checks the in-signature first) is decoded.
    fuzzCheck(!fits || request != nil, "a well-formed \(member) call was refused")
    guard let request else { continue }
    fuzzCheck(request.member == member, "\(member) decoded as \(request.member)")
    fuzzCheck(
      request.device == arguments.first?.objectPathValue, "the request's device is another")
    switch request {
    case .displayPinCode(_, let pin), .authorizeService(_, let pin):
      fuzzCheck(pin == arguments[1].stringValue, "the request's string is another")
    case .displayPasskey(_, let passkey, let entered):
      fuzzCheck(
        passkey == arguments[1].uint32Value && entered == arguments[2].uint16Value,
        "the request's passkey is another")
    case .requestConfirmation(_, let passkey):
      fuzzCheck(passkey == arguments[1].uint32Value, "the request's passkey is another")
    default:
      break
    }
    // Answers: the reply fits the out-signature, or the answer is refused for a reason.
    let text = arguments.compactMap(\.stringValue).first ?? ""
    let number = arguments.compactMap(\.uint32Value).first ?? 0
    for answer in [AgentAnswer.accept, .pinCode(text), .passkey(number)] {
      let reply = Result { () throws(AgentRefusal) in try Agent1.reply(to: request, with: answer) }
      let fitting: Bool
      switch (request, answer) {
      case (.requestPinCode, .pinCode(let pin)): fitting = (1...16).contains(pin.count)
      case (.requestPasskey, .passkey(let passkey)): fitting = passkey <= 999_999
      case (.requestPinCode, _), (.requestPasskey, _): fitting = false
      case (_, .accept): fitting = true
      default: fitting = false
      }
      switch reply {
      case .success(let body):
        fuzzCheck(fitting, "\(member) accepted the answer \(answer)")
        let output = method!.output
        fuzzCheck(
          body.map(\.signature.rawValue).joined() == output.rawValue,
          "the reply to \(member) is not of type \(output)")
      case .failure:
        fuzzCheck(!fitting, "\(member) refused the answer \(answer)")
      }
    }
  }
}

// MARK: GATT

/// ReadValue's and WriteValue's options, as the exported characteristic decodes them.
private func checkGattOptions(_ arguments: [DBusValue]) {
  // ReadValue(a{sv}) and AcquireNotify/AcquireWrite(a{sv}).
  let readOptions = arguments.first?.stringVariantDictionary ?? [:]
  let read = GattReadRequest(options: readOptions)
  fuzzCheck(
    read.offset == Int(readOptions["offset"]?.uint16Value ?? 0), "the read offset is another")
  fuzzCheck((0...0xFFFF).contains(read.offset), "a read offset out of range: \(read.offset)")
  fuzzCheck(read.mtu.map { (0...0xFFFF).contains($0) } ?? true, "an MTU out of range")
  fuzzCheck(read.device == readOptions["device"]?.objectPathValue, "the read device is another")
  fuzzCheck(read.link == readOptions["link"]?.stringValue, "the read link is another")
  // WriteValue(ay, a{sv}).
  let value = arguments.first?.bytesValue ?? []
  let writeOptions = arguments.dropFirst().first?.stringVariantDictionary ?? [:]
  let write = GattWriteRequest(value: value, options: writeOptions)
  fuzzCheck(write.value == value, "the written value is another")
  fuzzCheck(
    write.offset == Int(writeOptions["offset"]?.uint16Value ?? 0), "the write offset is another")
  fuzzCheck(
    write.type?.rawValue == writeOptions["type"]?.stringValue || write.type == nil,
    "the write type is another")
  if let type = writeOptions["type"]?.stringValue,
    ["command", "request", "reliable"].contains(type)
  {
    fuzzCheck(write.type?.rawValue == type, "the write type \(type) was not read")
  }
  fuzzCheck(
    write.prepareAuthorize == (writeOptions["prepare-authorize"]?.boolValue ?? false),
    "prepare-authorize is another")
}

// MARK: Comparing

/// Values compared by their descriptions too, so that a NaN equals itself.
private func same(_ a: DBusValue, _ b: DBusValue) -> Bool {
  a == b || String(reflecting: a) == String(reflecting: b)
}

private func same<Key: Hashable>(_ a: [Key: DBusValue], _ b: [Key: DBusValue]) -> Bool {
  a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
}

private func same<Key: Hashable>(_ a: [Key: [String: DBusValue]], _ b: [Key: [String: DBusValue]])
  -> Bool
{
  a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
}

private func same(_ a: ObjectManagerSignal?, _ b: ObjectManagerSignal?) -> Bool {
  switch (a, b) {
  case (nil, nil): true
  case (.interfacesAdded(let p, let i)?, .interfacesAdded(let q, let j)?): p == q && same(i, j)
  case (.interfacesRemoved(let p, let i)?, .interfacesRemoved(let q, let j)?): p == q && i == j
  case (
    .propertiesChanged(let p, let i, let c, let v)?,
    .propertiesChanged(let q, let j, let d, let w)?
  ):
    p == q && i == j && same(c, d) && v == w
  default: false
  }
}

private func same(_ a: BlueZObjectEvent, _ b: BlueZObjectEvent) -> Bool {
  switch (a, b) {
  case (.interfacesAdded(let p, let i), .interfacesAdded(let q, let j)): p == q && same(i, j)
  case (.interfacesRemoved(let p, let i), .interfacesRemoved(let q, let j)): p == q && i == j
  case (
    .propertiesChanged(let p, let i, let c, let v, let x),
    .propertiesChanged(let q, let j, let d, let w, let y)
  ):
    p == q && i == j && same(c, d) && v == w && same(x, y)
  default: false
  }
}
