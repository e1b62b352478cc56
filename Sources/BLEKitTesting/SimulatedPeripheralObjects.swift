// The D-Bus objects of a simulated peripheral: Device1 with Connect and Disconnect, and the
// GATT objects bluetoothd exports once a connection has resolved the services.
import BLEKit
import BlueZ
import Bluetooth
import DBus

extension SimulatedPeripheral {
  /// The GATT database flattened: services, their characteristics, their descriptors, each
  /// with a handle that names its object (`service000a`, `char000b`, `desc000d`) as
  /// bluetoothd does.
  struct Database: Sendable {
    enum Kind: Sendable {
      case service(primary: Bool)
      case characteristic(CharacteristicProperties)
      case descriptor
    }
    struct Attribute: Sendable {
      let kind: Kind
      let uuid: BluetoothUUID
      let handle: UInt16
      /// The service of a characteristic, the characteristic of a descriptor.
      let parent: Int?
      let initialValue: [UInt8]
    }
    let attributes: [Attribute]

    init(services: [SimulatedService]) {
      var attributes: [Attribute] = []
      var handle: UInt16 = 0x0009
      for service in services {
        handle += 1
        let serviceIndex = attributes.count
        attributes.append(
          Attribute(
            kind: .service(primary: service.isPrimary), uuid: service.uuid, handle: handle,
            parent: nil, initialValue: []))
        for characteristic in service.characteristics {
          handle += 1
          let characteristicIndex = attributes.count
          attributes.append(
            Attribute(
              kind: .characteristic(characteristic.properties), uuid: characteristic.uuid,
              handle: handle, parent: serviceIndex, initialValue: characteristic.value))
          handle += 1  // the value's handle
          for descriptor in characteristic.descriptors {
            handle += 1
            attributes.append(
              Attribute(
                kind: .descriptor, uuid: descriptor.uuid, handle: handle,
                parent: characteristicIndex, initialValue: descriptor.value))
          }
        }
      }
      self.attributes = attributes
    }

    /// The first characteristic or descriptor with this UUID.
    func index(of uuid: BluetoothUUID) -> Int? {
      attributes.firstIndex {
        if case .service = $0.kind { return false }
        return $0.uuid == uuid
      }
    }

    func path(of index: Int, device: ObjectPath) -> ObjectPath {
      let attribute = attributes[index]
      let hex = String(attribute.handle, radix: 16)
      let number = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
      switch attribute.kind {
      case .service: return device.appending("service\(number)")
      case .characteristic:
        return path(of: attribute.parent!, device: device).appending("char\(number)")
      case .descriptor:
        return path(of: attribute.parent!, device: device).appending("desc\(number)")
      }
    }
  }

  // MARK: Device1

  func deviceInterface() -> ExportedInterface {
    let property = {
      (name: String, signature: Signature, get: @escaping @Sendable (State) -> DBusValue?) in
      ExportedProperty(name: name, signature: signature, access: .read) { [weak self] in
        self?.state.read(get)
      }
    }
    let address = self.address.rawValue
    return ExportedInterface(
      name: Device1.interface,
      methods: [
        ExportedMethod(name: "Connect", inSignature: "", outSignature: "") { [weak self] _ in
          try await self?.acceptConnection()
          return []
        },
        ExportedMethod(name: "Disconnect", inSignature: "", outSignature: "") { [weak self] _ in
          self?.dropLink()
          return []
        },
      ],
      properties: [
        property("Address", "s") { _ in .string(address) },
        property("AddressType", "s") { _ in .string("public") },
        property("Adapter", "o") { _ in .objectPath(SimulationHost.adapterPath) },
        property("Name", "s") { state in state.advertisement.name.map { .string($0) } },
        property("Alias", "s") { state in
          .string(state.advertisement.name ?? address.split(separator: ":").joined(separator: "-"))
        },
        property("RSSI", "n") { state in .int16(Int16(clamping: state.advertisement.rssi)) },
        property("TxPower", "n") { state in
          state.advertisement.txPower.map { .int16(Int16(clamping: $0)) }
        },
        property("UUIDs", "as") { state in
          // Connected, bluetoothd lists the services it resolved; before, those advertised.
          .strings(state.advertisement.serviceUUIDs.map(\.uuidString))
        },
        property("ManufacturerData", "a{qv}") { state in
          state.advertisement.manufacturerData.isEmpty
            ? nil
            : .dictionary(
              key: "q", value: "v",
              state.advertisement.manufacturerData.sorted { $0.key < $1.key }.map {
                DBusDictEntry(key: .uint16($0.key), value: .variant(.bytes($0.value)))
              })
        },
        property("ServiceData", "a{sv}") { state in
          state.advertisement.serviceData.isEmpty
            ? nil
            : .dictionary(
              key: "s", value: "v",
              state.advertisement.serviceData.sorted { $0.key < $1.key }.map {
                DBusDictEntry(key: .string($0.key.uuidString), value: .variant(.bytes($0.value)))
              })
        },
        property("Connected", "b") { state in .bool(state.connected) },
        property("ServicesResolved", "b") { state in .bool(state.servicesResolved) },
        property("Paired", "b") { _ in .bool(false) },
        property("Bonded", "b") { _ in .bool(false) },
        property("Trusted", "b") { _ in .bool(false) },
        property("Blocked", "b") { _ in .bool(false) },
      ])
  }

  /// Device1.Connect: Connected, the GATT objects, then ServicesResolved, as bluetoothd
  /// reports a connection whose discovery has finished.
  func acceptConnection() async throws {
    let host = state.update { state -> SimulationHost? in
      guard !state.connected, !state.vanished else { return nil }
      state.connected = true
      state.connections += 1
      return state.host
    }
    guard let host else {
      if state.read(\.connected) {
        throw DBusError.remote(
          name: "org.bluez.Error.AlreadyConnected", message: "Already Connected")
      }
      throw DBusError.remote(
        name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")
    }
    emit(path, Device1.interface, ["Connected": .bool(true)])
    for index in database.attributes.indices {
      try? host.connection.export(
        ExportedObject(interfaces: [gattInterface(index)]),
        at: database.path(of: index, device: path))
    }
    state.update { $0.servicesResolved = true }
    emit(path, Device1.interface, ["ServicesResolved": .bool(true)])
  }

  /// The link's end, from either side: held requests fail, ServicesResolved and Connected
  /// become false, the GATT objects go (bluetoothd keeps none for a device that is not
  /// paired).
  func dropLink() {
    let dropped = state.update { state -> [CheckedContinuation<Bool, Never>]? in
      guard state.connected else { return nil }
      state.connected = false
      state.servicesResolved = false
      state.notifying = []
      state.cachedValues = [:]
      defer { state.held = [:] }
      return Array(state.held.values)
    }
    guard let dropped, let host = state.read(\.host) else { return }
    for request in dropped { request.resume(returning: false) }
    emit(path, Device1.interface, ["ServicesResolved": .bool(false)])
    emit(path, Device1.interface, ["Connected": .bool(false)])
    for index in database.attributes.indices.reversed() {
      host.connection.unexport(database.path(of: index, device: path))
    }
  }

  // MARK: GATT objects

  private func gattInterface(_ index: Int) -> ExportedInterface {
    let attribute = database.attributes[index]
    let device = path
    let uuid = attribute.uuid.uuidString
    let constant = { (name: String, value: DBusValue) in
      ExportedProperty(name: name, signature: value.signature, access: .read) { value }
    }
    switch attribute.kind {
    case .service(let primary):
      return ExportedInterface(
        name: GattService1.interface,
        properties: [
          constant("UUID", .string(uuid)), constant("Device", .objectPath(device)),
          constant("Primary", .bool(primary)), constant("Includes", .objectPaths([])),
          constant("Handle", .uint16(attribute.handle)),
        ])
    case .characteristic(let properties):
      return ExportedInterface(
        name: GattCharacteristic1.interface,
        methods: valueMethods(index) + [
          ExportedMethod(name: "StartNotify", inSignature: "", outSignature: "") {
            [weak self] _ in
            try await self?.subscribe(index, on: true)
            return []
          },
          ExportedMethod(name: "StopNotify", inSignature: "", outSignature: "") {
            [weak self] _ in
            try await self?.subscribe(index, on: false)
            return []
          },
          // Not simulated: BLEKit then takes StartNotify and WriteValue.
          Self.notSupported("AcquireNotify"), Self.notSupported("AcquireWrite"),
        ],
        properties: [
          constant("UUID", .string(uuid)),
          constant("Service", .objectPath(database.path(of: attribute.parent!, device: device))),
          constant("Flags", .strings(Self.flags(properties))),
          constant("Handle", .uint16(attribute.handle + 1)),
          constant("MTU", .uint16(UInt16(clamping: mtu))),
          ExportedProperty(name: "Value", signature: "ay", access: .read) { [weak self] in
            self?.state.read { $0.cachedValues[index] }.map { .bytes($0) }
          },
          ExportedProperty(name: "Notifying", signature: "b", access: .read) { [weak self] in
            self?.state.read { .bool($0.notifying.contains(index)) }
          },
        ])
    case .descriptor:
      return ExportedInterface(
        name: GattDescriptor1.interface,
        methods: valueMethods(index),
        properties: [
          constant("UUID", .string(uuid)),
          constant(
            "Characteristic", .objectPath(database.path(of: attribute.parent!, device: device))),
          constant("Flags", .strings(["read", "write"])),
          constant("Handle", .uint16(attribute.handle)),
        ])
    }
  }

  /// bluetoothd's `Flags` for characteristic properties.
  /// ReadValue and WriteValue of attribute `index`, alike for characteristics and descriptors.
  private func valueMethods(_ index: Int) -> [ExportedMethod] {
    [
      ExportedMethod(name: "ReadValue", inSignature: "a{sv}", outSignature: "ay") {
        [weak self] call in
        guard let self else { return [] }
        return [.bytes(try await self.read(index, options: call.arguments.first))]
      },
      ExportedMethod(name: "WriteValue", inSignature: "aya{sv}", outSignature: "") {
        [weak self] call in
        try await self?.write(index, call.arguments)
        return []
      },
    ]
  }

  /// A method bluetoothd offers that the simulation answers as not supported.
  private static func notSupported(_ name: MemberName) -> ExportedMethod {
    ExportedMethod(name: name, inSignature: "a{sv}", outSignature: "hq") { _ in
      throw DBusError.remote(
        name: "org.bluez.Error.NotSupported", message: "Operation is not supported")
    }
  }

  static func flags(_ properties: CharacteristicProperties) -> [String] {
    let table: [(CharacteristicProperties, String)] = [
      (.broadcast, "broadcast"), (.read, "read"),
      (.writeWithoutResponse, "write-without-response"), (.write, "write"),
      (.notify, "notify"), (.indicate, "indicate"),
      (.authenticatedSignedWrites, "authenticated-signed-writes"),
      (.extendedProperties, "extended-properties"),
    ]
    return table.filter { properties.contains($0.0) }.map(\.1)
  }

  /// Applies the scripted fault of an attribute, if any: throws its error, or holds the
  /// request until released (returns) or the link drops (throws).
  private func applyFault(_ index: Int) async throws {
    let uuid = database.attributes[index].uuid
    switch state.read({ $0.faults[uuid] }) {
    case nil:
      return
    case .attError(let code):
      let error = SimulatedFault.bluezError(forATT: code)
      throw DBusError.remote(name: error.name, message: error.message)
    case .noAnswer:
      let served = await withCheckedContinuation {
        (continuation: CheckedContinuation<Bool, Never>) in
        let stillConnected = state.update { state -> Bool in
          guard state.connected else { return false }
          state.nextHeld += 1
          state.held[state.nextHeld] = continuation
          return true
        }
        if !stillConnected { continuation.resume(returning: false) }
      }
      if !served {
        // bluetoothd answers a request that the link's loss cancelled with ATT code 0.
        throw DBusError.remote(name: "org.bluez.Error.Failed", message: "Operation failed")
      }
    }
  }

  private func read(_ index: Int, options: DBusValue?) async throws -> [UInt8] {
    try await applyFault(index)
    let offset = Int(options?.stringVariantDictionary?["offset"]?.uint16Value ?? 0)
    let (value, changed) = state.update { state -> ([UInt8], Bool) in
      let value = state.values[index]
      guard case .characteristic = database.attributes[index].kind,
        state.cachedValues[index] != value
      else { return (value, false) }
      state.cachedValues[index] = value
      return (value, true)
    }
    guard offset <= value.count else {
      let error = SimulatedFault.bluezError(forATT: 0x07)
      throw DBusError.remote(name: error.name, message: error.message)
    }
    // bluetoothd caches a value it read as `Value`, and signals the change.
    if changed {
      emit(
        database.path(of: index, device: path), GattCharacteristic1.interface,
        ["Value": .bytes(value)])
    }
    return Array(value[offset...])
  }

  private func write(_ index: Int, _ arguments: [DBusValue]) async throws {
    try await applyFault(index)
    let value = arguments.first?.bytesValue ?? []
    let options = arguments.dropFirst().first?.stringVariantDictionary ?? [:]
    let command = options["type"]?.stringValue == "command"
    state.update { $0.values[index] = value }
    record(
      SimulatedWrite(uuid: database.attributes[index].uuid, value: value, withResponse: !command))
  }

  private func subscribe(_ index: Int, on: Bool) async throws {
    if on { try await applyFault(index) }
    let changed = state.update { state -> Bool in
      on ? state.notifying.insert(index).inserted : state.notifying.remove(index) != nil
    }
    if changed {
      emit(
        database.path(of: index, device: path), GattCharacteristic1.interface,
        ["Notifying": .bool(on)])
    }
  }
}
