// dbus-bench: the Swift side of scripts/bench-dbus.
//   dbus-bench rtt <bus address> <seconds> [calls]   round trips per second (server echoes
//                                             "si"); with calls, exactly that many after the
//                                             warm-up (bench-dbus --callgrind)
//   dbus-bench rtt-executor <address> <s>     the same, caller on the client's executor
//   dbus-bench decode <file> <iterations>     writes the GetManagedObjects-shaped message to
//                                             <file>, then times demarshal + decode to DBusValue
//   dbus-bench decoder <reader> <message> <n>   decodes one received message n times, for
//                                             scripts/bench-decoders (callgrind): reader
//                                             `whole` (DBusMessage.arguments()) or `typed`
//                                             (MessageReader's typed reads); message `managed`
//                                             (1,000 devices), `added`, `changed`
import DBus
import Foundation

func cpuSeconds() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Voluntary plus involuntary context switches of this process so far, every thread.
func contextSwitches() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_nvcsw) + Double(usage.ru_nivcsw)
}

func cpuNow() -> Double {
  var ts = timespec()
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
  return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func now() -> Double {
  var ts = timespec()
  clock_gettime(CLOCK_MONOTONIC, &ts)
  return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A BlueZ-like GetManagedObjects reply describing `count` devices.
func managedObjectsMessage(devices count: Int) throws -> DBusMessage {
  var objects: [DBusDictEntry] = []
  objects.reserveCapacity(count)
  let allUUIDs = [
    "0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb",
    "0000180a-0000-1000-8000-00805f9b34fb", "00001800-0000-1000-8000-00805f9b34fb",
    "00001801-0000-1000-8000-00805f9b34fb",
  ]
  for index in 0..<count {
    let bytes = (0..<6).map { String(format: "%02X", (index >> ($0 * 4)) & 0xFF ^ $0 * 17) }
    let address = bytes.joined(separator: ":")
    let path = try ObjectPath("/org/bluez/hci0/dev_" + bytes.joined(separator: "_"))
    let uuids = Array(allUUIDs.prefix(3 + index % 3))
    let device: [String: DBusValue] = [
      "Address": .string(address),
      "AddressType": .string(index % 2 == 0 ? "public" : "random"),
      "Name": .string("Sensor \(index)"),
      "Alias": .string("Living room sensor \(index)"),
      "RSSI": .int16(Int16(-40 - index % 50)),
      "TxPower": .int16(Int16(index % 10)),
      "Paired": .bool(index % 3 == 0),
      "Connected": .bool(index % 5 == 0),
      "UUIDs": .strings(uuids),
      "ManufacturerData": .dictionary(
        key: "q", value: "v",
        [
          DBusDictEntry(
            key: .uint16(0x004C),
            value: .variant(.bytes((0..<23).map { UInt8(truncatingIfNeeded: $0 + index) })))
        ]),
      "ServiceData": .dictionary(
        key: "s", value: "v",
        [
          DBusDictEntry(
            key: "0000feaa-0000-1000-8000-00805f9b34fb",
            value: .variant(.bytes((0..<12).map { UInt8(truncatingIfNeeded: $0 * 3 + index) })))
        ]),
    ]
    let interfaces: DBusValue = .dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: "org.freedesktop.DBus.Introspectable", value: .dictionaryOfVariants([:])),
        DBusDictEntry(key: "org.bluez.Device1", value: .dictionaryOfVariants(device)),
        DBusDictEntry(key: "org.freedesktop.DBus.Properties", value: .dictionaryOfVariants([:])),
      ])
    objects.append(DBusDictEntry(key: .objectPath(path), value: interfaces))
  }
  let message = try DBusMessage.signal(
    path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "Bench")
  try message.append([.dictionary(key: "o", value: "a{sa{sv}}", objects)])
  return message
}

func decodeBench(file: String, iterations: Int) throws {
  let wire = try managedObjectsMessage(devices: 1000).wireBytes()
  try Data(wire).write(to: URL(fileURLWithPath: file))
  var checksum = 0
  // Warm up.
  for _ in 0..<3 { checksum &+= try DBusMessage(wireBytes: wire).arguments().count }
  let start = cpuNow()
  for _ in 0..<iterations {
    let values = try DBusMessage(wireBytes: wire).arguments()
    checksum &+= values[0].dictionaryValue?.count ?? 0
  }
  let elapsed = cpuNow() - start
  print("decode_us=\(elapsed / Double(iterations) * 1e6) bytes=\(wire.count) check=\(checksum)")
}

/// An InterfacesAdded signal for one device, shaped as bluetoothd 5.66 sends it.
func interfacesAddedMessage() throws -> DBusMessage {
  let device: [String: DBusValue] = [
    "Address": "C0:FF:EE:00:00:01", "AddressType": "random", "Name": "Sensor 1",
    "Alias": "Sensor 1", "Paired": .bool(false), "Bonded": .bool(false),
    "Trusted": .bool(false), "Blocked": .bool(false), "LegacyPairing": .bool(false),
    "RSSI": .int16(-61), "Connected": .bool(false),
    "UUIDs": .strings(["0000180d-0000-1000-8000-00805f9b34fb"]),
    "Adapter": .objectPath("/org/bluez/hci0"),
    "ManufacturerData": .dictionary(
      key: "q", value: "v",
      [DBusDictEntry(key: .uint16(0x004C), value: .variant(.bytes(Array(0..<23))))]),
    "ServicesResolved": .bool(false),
  ]
  let message = try DBusMessage.signal(
    path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded")
  try message.append([
    .objectPath("/org/bluez/hci0/dev_C0_FF_EE_00_00_01"),
    .dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: "org.freedesktop.DBus.Introspectable", value: .dictionaryOfVariants([:])),
        DBusDictEntry(key: "org.bluez.Device1", value: .dictionaryOfVariants(device)),
        DBusDictEntry(key: "org.freedesktop.DBus.Properties", value: .dictionaryOfVariants([:])),
      ]),
  ])
  return message
}

/// A PropertiesChanged signal carrying a device's RSSI and ManufacturerData.
func propertiesChangedMessage() throws -> DBusMessage {
  let message = try DBusMessage.signal(
    path: "/org/bluez/hci0/dev_C0_FF_EE_00_00_01",
    interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
  try message.append([
    "org.bluez.Device1",
    .dictionaryOfVariants([
      "RSSI": .int16(-58),
      "ManufacturerData": .dictionary(
        key: "q", value: "v",
        [DBusDictEntry(key: .uint16(0x004C), value: .variant(.bytes(Array(0..<23))))]),
    ]),
    .strings([]),
  ])
  return message
}

/// Decodes one received (demarshalled) message `iterations` times with one of the readers.
func decoderBench(reader: String, message kind: String, iterations: Int) throws {
  let built: DBusMessage
  switch kind {
  case "managed": built = try managedObjectsMessage(devices: 1000)
  case "added": built = try interfacesAddedMessage()
  case "changed": built = try propertiesChangedMessage()
  default: throw DBusError(code: .invalidArgument, message: "unknown message \(kind)")
  }
  let message = try DBusMessage(wireBytes: try built.wireBytes())
  var checksum = 0
  for _ in 0..<iterations {
    switch (reader, kind) {
    case ("whole", _):
      checksum &+= try message.arguments().count
    case ("typed", "added"):
      checksum &+= try message.read { reader throws(DBusError) in
        _ = try reader.objectPath()
        return try reader.interfacesAndProperties().count
      }
    case ("typed", "changed"):
      checksum &+= try message.read { reader throws(DBusError) in
        _ = try reader.string()
        let changed = try reader.properties()
        return changed.count + (try reader.strings()).count
      }
    default: throw DBusError(code: .invalidArgument, message: "unknown reader \(reader)")
    }
  }
  print("reader=\(reader) message=\(kind) iterations=\(iterations) check=\(checksum)")
}

func rttBench(address: String, seconds: Double, calls fixedCalls: Int?, onConnectionExecutor: Bool)
  async throws
{
  let server = try DBusConnection(address: address)
  let client = try DBusConnection(address: address)
  defer {
    client.close()
    server.close()
  }
  try server.export(
    ExportedObject(interfaces: [
      ExportedInterface(
        name: "org.blekit.Bench",
        methods: [
          ExportedMethod(name: "Echo", inSignature: "si", outSignature: "si") { $0.arguments }
        ])
    ]), at: "/bench")
  func once(_ index: Int32) async throws {
    let reply = try await client.call(
      destination: server.uniqueName, path: "/bench", interface: "org.blekit.Bench",
      member: "Echo", arguments: [.string("hello"), .int32(index)])
    guard reply.count == 2, reply[1].int32Value == index else {
      throw DBusError(code: .unexpectedReply, message: "bad echo \(reply)")
    }
  }
  func loop() async throws {
    for index in 0..<500 { try await once(Int32(index)) }
    let start = now()
    let cpuStart = cpuSeconds()
    let switchStart = contextSwitches()
    var calls = 0
    if let fixedCalls {
      for _ in 0..<fixedCalls {
        try await once(Int32(truncatingIfNeeded: calls))
        calls += 1
      }
    }
    while fixedCalls == nil, now() - start < seconds {
      for _ in 0..<100 {
        try await once(Int32(truncatingIfNeeded: calls))
        calls += 1
      }
    }
    let elapsed = now() - start
    let cpu = cpuSeconds() - cpuStart
    let switches = contextSwitches() - switchStart
    print(
      "calls_per_sec=\(Double(calls) / elapsed) calls=\(calls)"
        + " cpu_us_per_call=\(cpu / Double(calls) * 1e6)"
        + " switches_per_call=\(switches / Double(calls))")
  }
  if onConnectionExecutor {
    try await withTaskExecutorPreference(client.executor) { try await loop() }
  } else {
    try await loop()
  }
}

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
  print("usage: dbus-bench rtt <address> <seconds> | decode <file> <iterations>")
  exit(2)
}
switch arguments[1] {
case "rtt", "rtt-executor":
  try await rttBench(
    address: arguments[2], seconds: Double(arguments[3]) ?? 3,
    calls: arguments.count > 4 ? Int(arguments[4]) : nil,
    onConnectionExecutor: arguments[1] == "rtt-executor")
case "decoder" where arguments.count >= 5:
  try decoderBench(reader: arguments[2], message: arguments[3], iterations: Int(arguments[4]) ?? 1)
case "decode": try decodeBench(file: arguments[2], iterations: Int(arguments[3]) ?? 50)
default:
  print("unknown mode \(arguments[1])")
  exit(2)
}
