// An advertisement as a struct of optional fields, exported as org.bluez.LEAdvertisement1.
import DBus
import Synchronization

/// What bluetoothd should advertise. Every optional field left nil is left out of the exported
/// object, so bluetoothd leaves it out of the advertising data.
public struct LEAdvertisement: Sendable, Hashable {
  /// The D-Bus interface this value is exported as.
  public static let interface = BlueZ.Interface.advertisement

  /// Connectable ("peripheral") or not ("broadcast").
  public enum Kind: String, Sendable, Hashable {
    case peripheral
    case broadcast
  }

  public var type: Kind
  /// 128-bit (or 16-bit short) UUID strings; bluetoothd shortens SIG UUIDs in the payload.
  public var serviceUUIDs: [String]?
  /// Company ID -> bytes.
  public var manufacturerData: [UInt16: [UInt8]]?
  /// Service UUID string -> bytes.
  public var serviceData: [String: [UInt8]]?
  public var solicitUUIDs: [String]?
  public var localName: String?
  /// System includes: "tx-power", "appearance", "local-name" (see
  /// ``LEAdvertisingManager1/Properties/supportedIncludes``).
  public var includes: [String]?
  /// General discoverable; must stay nil for ``Kind/broadcast``.
  public var discoverable: Bool?
  /// Requested transmit power in dBm (-127...20), used when the adapter can set it.
  public var txPower: Int16?
  public var appearance: UInt16?
  /// Lifetime of the advertisement in seconds.
  public var timeout: UInt16?
  /// `SecondaryChannel`: "1M", "2M" or "Coded" (extended advertising; one of
  /// ``LEAdvertisingManager1/Properties/supportedSecondaryChannels``).
  public var secondaryChannel: String?
  /// `MinInterval` and `MaxInterval` in milliseconds. BlueZ 5.66 ignores both, and
  /// ``txPower``, unless bluetoothd runs with `--experimental`.
  public var minInterval: UInt32?
  public var maxInterval: UInt32?

  public init(
    type: Kind = .peripheral, serviceUUIDs: [String]? = nil,
    manufacturerData: [UInt16: [UInt8]]? = nil, serviceData: [String: [UInt8]]? = nil,
    solicitUUIDs: [String]? = nil, localName: String? = nil, includes: [String]? = nil,
    discoverable: Bool? = nil, txPower: Int16? = nil, appearance: UInt16? = nil,
    timeout: UInt16? = nil, secondaryChannel: String? = nil, minInterval: UInt32? = nil,
    maxInterval: UInt32? = nil
  ) {
    self.secondaryChannel = secondaryChannel
    self.minInterval = minInterval
    self.maxInterval = maxInterval
    self.type = type
    self.serviceUUIDs = serviceUUIDs
    self.manufacturerData = manufacturerData
    self.serviceData = serviceData
    self.solicitUUIDs = solicitUUIDs
    self.localName = localName
    self.includes = includes
    self.discoverable = discoverable
    self.txPower = txPower
    self.appearance = appearance
    self.timeout = timeout
  }

  /// The exported properties: name, D-Bus signature and value (nil fields left out).
  var propertyTable: [(name: String, signature: Signature, value: DBusValue)] {
    var table: [(String, Signature, DBusValue)] = [("Type", "s", .string(type.rawValue))]
    if let serviceUUIDs {
      table.append(("ServiceUUIDs", "as", .array(element: "s", serviceUUIDs.map(DBusValue.string))))
    }
    if let manufacturerData {
      let entries = manufacturerData.keys.sorted().map {
        DBusDictEntry(key: .uint16($0), value: .variant(.bytes(manufacturerData[$0]!)))
      }
      table.append(("ManufacturerData", "a{qv}", .dictionary(key: "q", value: "v", entries)))
    }
    if let serviceData {
      let entries = serviceData.keys.sorted().map {
        DBusDictEntry(key: .string($0), value: .variant(.bytes(serviceData[$0]!)))
      }
      table.append(("ServiceData", "a{sv}", .dictionary(key: "s", value: "v", entries)))
    }
    if let solicitUUIDs {
      table.append(("SolicitUUIDs", "as", .array(element: "s", solicitUUIDs.map(DBusValue.string))))
    }
    if let localName { table.append(("LocalName", "s", .string(localName))) }
    if let includes {
      table.append(("Includes", "as", .array(element: "s", includes.map(DBusValue.string))))
    }
    if let discoverable { table.append(("Discoverable", "b", .bool(discoverable))) }
    if let txPower { table.append(("TxPower", "n", .int16(txPower))) }
    if let appearance { table.append(("Appearance", "q", .uint16(appearance))) }
    if let timeout { table.append(("Timeout", "q", .uint16(timeout))) }
    if let secondaryChannel { table.append(("SecondaryChannel", "s", .string(secondaryChannel))) }
    if let minInterval { table.append(("MinInterval", "u", .uint32(minInterval))) }
    if let maxInterval { table.append(("MaxInterval", "u", .uint32(maxInterval))) }
    return table.map { (name: $0.0, signature: $0.1, value: $0.2) }
  }

  /// The exported object: the properties above and `Release`, guarded by `callerCheck`.
  func exportedObject(
    callerCheck: BluetoothdCallerCheck, onRelease: @escaping @Sendable () -> Void
  ) -> ExportedObject {
    let properties = propertyTable.map { entry in
      let value = entry.value
      return ExportedProperty(name: entry.name, signature: entry.signature, access: .read) {
        value
      }
    }
    let release = ExportedMethod(name: "Release", inSignature: "", outSignature: "") {
      invocation in
      try callerCheck.check(invocation.sender)
      onRelease()
      return []
    }
    return ExportedObject(interfaces: [
      ExportedInterface(name: Self.interface, methods: [release], properties: properties)
    ])
  }
}

extension LEAdvertisingManager1 {
  /// Exports `advertisement` at `path` and registers it.
  ///
  /// `onRelease` runs when bluetoothd drops the advertisement by itself (`Release`), e.g. when
  /// its timeout ends or the adapter powers off. If registration fails, nothing stays exported.
  public func register(
    _ advertisement: LEAdvertisement, at path: ObjectPath, callerCheck: BluetoothdCallerCheck,
    onRelease: @escaping @Sendable () -> Void = {}
  ) async throws(BlueZError) -> LEAdvertisementRegistration {
    let registration = LEAdvertisementRegistration(manager: self, path: path)
    var object = advertisement.exportedObject(callerCheck: callerCheck) { [weak registration] in
      registration?.released()
      onRelease()
    }
    // Its properties too are for bluetoothd only.
    object.admit = { sender throws(DBusError) in try callerCheck.check(sender) }
    do {
      try connection.export(object, at: path)
    } catch {
      throw BlueZError(error)
    }
    do {
      try await registerAdvertisement(path)
    } catch {
      connection.unexport(path)
      registration.released()
      throw error
    }
    return registration
  }
}

/// A registered advertisement. ``unregister()`` stops it and removes the exported object.
public final class LEAdvertisementRegistration: Sendable {
  public var path: ObjectPath { state.path }
  private let manager: LEAdvertisingManager1
  private let state: RegistrationState

  init(manager: LEAdvertisingManager1, path: ObjectPath) {
    self.manager = manager
    self.state = RegistrationState(path: path, connection: manager.connection)
  }

  /// False once unregistered or released by bluetoothd.
  public var isRegistered: Bool { state.isRegistered }

  func released() {
    state.released()
  }

  /// Registers the still-exported advertisement again, with the bluetoothd that owns
  /// `org.bluez` now (after a restart, the old one's registrations are gone). Does nothing
  /// once ``unregister()`` ran.
  public func registerAgain() async throws(BlueZError) {
    guard state.isExported else { return }
    try await manager.registerAdvertisement(path)
    state.registeredAgain()
  }

  /// Unregisters (unless bluetoothd already released it) and unexports. Idempotent.
  @discardableResult
  public func unregister() async -> BlueZError? {
    let manager = self.manager
    let path = self.path
    return await state.unregister { () throws(BlueZError) in
      try await manager.unregisterAdvertisement(path)
    }
  }
}
