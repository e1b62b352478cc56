// An advertisement monitor as a value, exported as org.bluez.AdvertisementMonitor1 under its
// own ObjectManager root, and the registration that undoes it.
import DBus
import Synchronization

/// One passive-scanning job for bluetoothd: or-patterns over advertising data, optional RSSI
/// thresholds (BlueZ's `doc/org.bluez.AdvertisementMonitor.rst`).
public struct AdvertisementMonitor: Sendable, Hashable {
  /// The D-Bus interface this value is exported as.
  public static let interface: InterfaceName = "org.bluez.AdvertisementMonitor1"

  /// One or-pattern: the bytes `content` found at `startPosition` of an AD structure of type
  /// `adType` (the structure's data, after its length and type bytes).
  public struct Pattern: Sendable, Hashable {
    public var startPosition: UInt8
    /// The AD type: 0x01...0x3D or 0xFF (bluetoothd refuses others).
    public var adType: UInt8
    /// 1 to 31 bytes (bluetoothd refuses an empty pattern).
    public var content: [UInt8]

    public init(startPosition: UInt8 = 0, adType: UInt8, content: [UInt8]) {
      self.startPosition = startPosition
      self.adType = adType
      self.content = content
    }
  }

  public var patterns: [Pattern]
  /// `RSSIHighThreshold` (dBm, -127...20): a device counts as found once heard at least this
  /// strong for ``rssiHighTimeout`` seconds. `nil` leaves it unset.
  public var rssiHighThreshold: Int16?
  /// `RSSILowThreshold` (dBm): a found device counts as lost once not heard this strong for
  /// ``rssiLowTimeout`` seconds.
  public var rssiLowThreshold: Int16?
  /// `RSSIHighTimeout`, seconds (1...300).
  public var rssiHighTimeout: UInt16?
  /// `RSSILowTimeout`, seconds (1...300).
  public var rssiLowTimeout: UInt16?
  /// `RSSISamplingPeriod`: 0 every advertisement, 255 only the first, N groups of N x 100 ms.
  public var rssiSamplingPeriod: UInt16?

  public init(
    patterns: [Pattern], rssiHighThreshold: Int16? = nil, rssiLowThreshold: Int16? = nil,
    rssiHighTimeout: UInt16? = nil, rssiLowTimeout: UInt16? = nil,
    rssiSamplingPeriod: UInt16? = nil
  ) {
    self.patterns = patterns
    self.rssiHighThreshold = rssiHighThreshold
    self.rssiLowThreshold = rssiLowThreshold
    self.rssiHighTimeout = rssiHighTimeout
    self.rssiLowTimeout = rssiLowTimeout
    self.rssiSamplingPeriod = rssiSamplingPeriod
  }

  /// The exported properties: name, D-Bus signature and value (nil fields left out).
  var propertyTable: [(name: String, signature: Signature, value: DBusValue)] {
    let patternValues = patterns.map { pattern in
      DBusValue.structure([
        .byte(pattern.startPosition), .byte(pattern.adType), .bytes(pattern.content),
      ])
    }
    var table: [(name: String, signature: Signature, value: DBusValue)] = [
      ("Type", "s", .string("or_patterns")),
      ("Patterns", "a(yyay)", .array(element: "(yyay)", patternValues)),
    ]
    if let rssiHighThreshold { table.append(("RSSIHighThreshold", "n", .int16(rssiHighThreshold))) }
    if let rssiLowThreshold { table.append(("RSSILowThreshold", "n", .int16(rssiLowThreshold))) }
    if let rssiHighTimeout { table.append(("RSSIHighTimeout", "q", .uint16(rssiHighTimeout))) }
    if let rssiLowTimeout { table.append(("RSSILowTimeout", "q", .uint16(rssiLowTimeout))) }
    if let rssiSamplingPeriod {
      table.append(("RSSISamplingPeriod", "q", .uint16(rssiSamplingPeriod)))
    }
    return table
  }

  /// The exported object: the properties above and the four methods bluetoothd calls, each
  /// handed to `events`.
  func exportedObject(events: @escaping @Sendable (AdvertisementMonitorEvent) -> Void)
    -> ExportedObject
  {
    let properties = propertyTable.map { entry in
      let value = entry.value
      return ExportedProperty(name: entry.name, signature: entry.signature, access: .read) {
        value
      }
    }
    func method(
      _ name: MemberName, _ signature: Signature,
      _ event: @escaping @Sendable ([DBusValue]) -> AdvertisementMonitorEvent?
    ) -> ExportedMethod {
      ExportedMethod(name: name, inSignature: signature, outSignature: "") { invocation in
        if let event = event(invocation.arguments) { events(event) }
        return []
      }
    }
    let methods = [
      method("Release", "") { _ in .released },
      method("Activate", "") { _ in .activated },
      method("DeviceFound", "o") { arguments in
        arguments.first?.objectPathValue.map(AdvertisementMonitorEvent.deviceFound)
      },
      method("DeviceLost", "o") { arguments in
        arguments.first?.objectPathValue.map(AdvertisementMonitorEvent.deviceLost)
      },
    ]
    return ExportedObject(interfaces: [
      ExportedInterface(name: Self.interface, methods: methods, properties: properties)
    ])
  }
}

/// What bluetoothd tells a registered monitor (the methods of `AdvertisementMonitor1`).
public enum AdvertisementMonitorEvent: Sendable, Hashable {
  /// The monitor runs: `DeviceFound` and `DeviceLost` can come.
  case activated
  /// The monitor could not be activated, or was deactivated (unregistered, adapter gone).
  case released
  /// A device matched (and passed the RSSI thresholds, if set).
  case deviceFound(ObjectPath)
  /// A found device was not heard within the low RSSI timeout.
  case deviceLost(ObjectPath)
}

extension AdvertisementMonitorManager1 {
  /// Exports `monitors` at `<root>/monitor0`, `monitor1`, ... with an ObjectManager at
  /// `root`, then registers `root`. Only callers `callerCheck` admits (bluetoothd) may call
  /// or read them.
  ///
  /// `events` gets bluetoothd's calls to every monitor, on the connection's queue; it must
  /// return quickly. If registration fails, nothing stays exported.
  public func register(
    _ monitors: [AdvertisementMonitor], at root: ObjectPath, callerCheck: BluetoothdCallerCheck,
    events: @escaping @Sendable (AdvertisementMonitorEvent) -> Void
  ) async throws(BlueZError) -> AdvertisementMonitorRegistration {
    let admit: @Sendable (BusName) throws(DBusError) -> Void = { sender throws(DBusError) in
      try callerCheck.check(sender)
    }
    var exported: [ObjectPath] = []
    func rollBack() {
      for path in exported.reversed() { connection.unexport(path) }
      connection.removeObjectManager(at: root)
    }
    do throws(DBusError) {
      for (index, monitor) in monitors.enumerated() {
        let path = root.appending("monitor\(index)")
        var object = monitor.exportedObject(events: events)
        object.admit = admit
        try connection.export(object, at: path)
        exported.append(path)
      }
      try connection.addObjectManager(at: root, admit: admit)
    } catch {
      rollBack()
      throw BlueZError(error)
    }
    do {
      try await registerMonitor(root)
    } catch {
      rollBack()
      throw error
    }
    return AdvertisementMonitorRegistration(manager: self, root: root, monitors: exported)
  }
}

/// A registered monitor tree. ``unregister()`` ends it and removes the exported objects.
public final class AdvertisementMonitorRegistration: Sendable {
  /// The ObjectManager root that was registered.
  public let root: ObjectPath
  /// The exported monitors' paths.
  public let monitors: [ObjectPath]
  private let manager: AdvertisementMonitorManager1
  private let done = Mutex(false)

  init(manager: AdvertisementMonitorManager1, root: ObjectPath, monitors: [ObjectPath]) {
    self.manager = manager
    self.root = root
    self.monitors = monitors
  }

  /// Unregisters (`UnregisterMonitor`) and unexports. Idempotent; returns bluetoothd's error
  /// (e.g. when it already dropped the monitor), which changes nothing here.
  @discardableResult
  public func unregister() async -> BlueZError? {
    let first = done.withLock { done in
      defer { done = true }
      return !done
    }
    guard first else { return nil }
    var failure: BlueZError?
    do {
      try await manager.unregisterMonitor(root)
    } catch {
      failure = error
    }
    for path in monitors.reversed() { manager.connection.unexport(path) }
    manager.connection.removeObjectManager(at: root)
    return failure
  }
}
