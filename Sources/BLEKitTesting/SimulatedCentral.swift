// A simulated remote central for the app's PeripheralManager: it connects (a Device1 object
// on hci0, Connected) and reaches the app's registered GATT application as bluetoothd does:
// GetManagedObjects, then ReadValue, WriteValue, StartNotify/StopNotify or AcquireNotify on
// the app's own objects, from the connection that owns org.bluez.
import BLEKit
import BlueZ
import Bluetooth
import DBus
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A central connected to the app's ``BLEKit/PeripheralManager`` through the simulation.
///
/// Get one from ``SimulatedBluetooth/connectCentral(address:mtu:)`` once the app has added
/// its services. A characteristic is named by its UUID: the first of that UUID among the
/// registered applications' characteristics. Requests carry the options bluetoothd passes
/// (`device`, `mtu`, `link` "LE"); there is no ATT layer below, so no prepared writes, no
/// long-read splitting and no MTU exchange.
public final class SimulatedCentral: Sendable {
  public let address: BluetoothAddress
  /// The MTU requests report (`mtu` option); the value an app may fit in one notification is
  /// `mtu - 3`.
  public let mtu: Int
  let host: SimulationHost
  private let connected = Mutex(true)

  init(host: SimulationHost, address: BluetoothAddress, mtu: Int) {
    self.host = host
    self.address = address
    self.mtu = mtu
  }

  var path: ObjectPath {
    SimulationHost.adapterPath.appending(
      "dev_" + address.rawValue.split(separator: ":").joined(separator: "_"))
  }

  private var options: DBusValue {
    .dictionaryOfVariants([
      "device": .objectPath(path), "mtu": .uint16(UInt16(clamping: mtu)), "link": .string("LE"),
    ])
  }

  /// Reads a characteristic of the app's services (bluetoothd's `ReadValue` on the app's
  /// object). An ATT error the app answers comes back as ``SimulationError`` naming the
  /// D-Bus error (e.g. `org.bluez.Error.NotPermitted`).
  public func read(_ characteristic: BluetoothUUID, offset: Int = 0) async throws -> [UInt8] {
    let (owner, path, _) = try await find(characteristic)
    var fields: [String: DBusValue] = options.stringVariantDictionary ?? [:]
    if offset > 0 { fields["offset"] = .uint16(UInt16(clamping: offset)) }
    let reply = try await call(
      owner, path, "ReadValue", [.dictionaryOfVariants(fields)], doing: "reading \(characteristic)")
    return reply.first?.bytesValue ?? []
  }

  /// Writes a characteristic of the app's services: a Write Request (`type` "request") or a
  /// Write Command (`type` "command").
  public func write(
    _ value: [UInt8], to characteristic: BluetoothUUID, withResponse: Bool = true
  ) async throws {
    let (owner, path, _) = try await find(characteristic)
    var fields: [String: DBusValue] = options.stringVariantDictionary ?? [:]
    fields["type"] = .string(withResponse ? "request" : "command")
    _ = try await call(
      owner, path, "WriteValue", [.bytes(value), .dictionaryOfVariants(fields)],
      doing: "writing \(characteristic)")
  }

  /// Subscribes to a characteristic's notifications: `AcquireNotify` when the app's object
  /// offers it (`NotifyAcquired`), else `StartNotify` and its `PropertiesChanged(Value)`
  /// signals, as bluetoothd chooses. The stream ends when the subscription or the simulation
  /// ends; dropping it does not unsubscribe (call ``unsubscribe(from:)``).
  public func subscribe(to characteristic: BluetoothUUID) async throws -> AsyncStream<[UInt8]> {
    let (owner, path, acquires) = try await find(characteristic)
    let (stream, continuation) = AsyncStream.makeStream(
      of: [UInt8].self, bufferingPolicy: .unbounded)
    if acquires {
      let reply = try await call(
        owner, path, "AcquireNotify", [options], doing: "subscribing to \(characteristic)")
      guard let fd = reply.first?.fileDescriptorValue?.take() else {
        throw SimulationError("AcquireNotify of \(characteristic) returned no socket")
      }
      // One datagram per value, read until the app closes its end (or the stream is dropped).
      // The app may have made the pair non-blocking: this end blocks, on a thread of its own.
      _ = Syscall.fcntl(fd, F_SETFL, Syscall.fcntl(fd, F_GETFL) & ~O_NONBLOCK)
      let socket = NotifySocketEnd(fd)
      continuation.onTermination = { _ in socket.shutDown() }
      Thread.detachNewThread {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
          let count = buffer.withUnsafeMutableBytes {
            Syscall.recv(fd, $0.baseAddress, $0.count, 0)
          }
          if count < 0, errno == EINTR { continue }
          if count <= 0 { break }
          continuation.yield(Array(buffer[0..<count]))
        }
        socket.close()
        continuation.finish()
      }
      return stream
    }
    let signals = try await host.connection.signals(
      MatchRule(
        sender: owner, path: path, interface: "org.freedesktop.DBus.Properties",
        member: "PropertiesChanged"))
    let relay = Task {
      do {
        for try await signal in signals {
          guard signal.arguments.first?.stringValue == GattCharacteristic1.interface.rawValue,
            let value = signal.arguments.dropFirst().first?.stringVariantDictionary?["Value"]?
              .bytesValue
          else { continue }
          continuation.yield(value)
        }
      } catch {}
      continuation.finish()
    }
    continuation.onTermination = { _ in
      relay.cancel()
      signals.cancel()
    }
    _ = try await call(owner, path, "StartNotify", [], doing: "subscribing to \(characteristic)")
    return stream
  }

  /// Ends a `StartNotify` subscription (bluetoothd's `StopNotify`); a socket subscription ends
  /// when the link does.
  public func unsubscribe(from characteristic: BluetoothUUID) async throws {
    let (owner, path, acquires) = try await find(characteristic)
    if !acquires {
      _ = try await call(owner, path, "StopNotify", [], doing: "unsubscribing")
    }
  }

  /// Ends the link: `Connected` becomes false and the device object goes, as bluetoothd
  /// reports a central that left.
  public func disconnect() {
    let was = connected.withLock { connected in
      defer { connected = false }
      return connected
    }
    guard was else { return }
    try? host.connection.emitPropertiesChanged(
      path: path, interface: Device1.interface, changed: ["Connected": .bool(false)])
    host.connection.unexport(path)
  }

  /// The owner and object of the first characteristic with `uuid` in a registered application,
  /// and whether it takes AcquireNotify.
  private func find(_ uuid: BluetoothUUID) async throws -> (BusName, ObjectPath, Bool) {
    guard connected.withLock({ $0 }) else { throw SimulationError("\(address) is disconnected") }
    for (root, owner) in host.state.read(\.applications).sorted(by: { $0.key < $1.key }) {
      let reply = try await host.connection.call(
        destination: owner, path: root, interface: "org.freedesktop.DBus.ObjectManager",
        member: "GetManagedObjects")
      for entry in reply.first?.dictionaryValue ?? [] {
        guard let path = entry.key.objectPathValue else { continue }
        for interface in entry.value.dictionaryValue ?? []
        where interface.key.stringValue == GattCharacteristic1.interface.rawValue {
          let properties = interface.value.stringVariantDictionary ?? [:]
          if let text = properties["UUID"]?.stringValue, (try? BluetoothUUID(text)) == uuid {
            return (owner, path, properties["NotifyAcquired"] != nil)
          }
        }
      }
    }
    throw SimulationError("no registered application has a characteristic \(uuid)")
  }

  private func call(
    _ owner: BusName, _ path: ObjectPath, _ member: MemberName, _ arguments: [DBusValue],
    doing: String
  ) async throws -> [DBusValue] {
    do {
      return try await host.connection.call(
        destination: owner, path: path, interface: GattCharacteristic1.interface,
        member: member, arguments: arguments)
    } catch {
      throw SimulationError("\(doing): \(error)")
    }
  }
}

/// The simulated central's end of an AcquireNotify socket: shut down to wake its reader when
/// the stream is dropped, closed once by the reader.
final class NotifySocketEnd: Sendable {
  private let fd: Mutex<Int32?>
  init(_ fd: Int32) { self.fd = Mutex(fd) }
  func shutDown() { fd.withLock { if let fd = $0 { _ = Syscall.shutdown(fd, Int32(SHUT_RDWR)) } } }
  func close() {
    fd.withLock {
      if let fd = $0 { _ = Syscall.close(fd) }
      $0 = nil
    }
  }
}

extension SimulatedBluetooth {
  /// A central connects to hci0: bluetoothd's device object for it appears and its
  /// `Connected` becomes true (what ``BLEKit/PeripheralManager`` reports as a connection).
  public func connectCentral(
    address: BluetoothAddress = try! BluetoothAddress("00:AA:02:00:00:01"), mtu: Int = 185
  ) async throws -> SimulatedCentral {
    let central = SimulatedCentral(host: host, address: address, mtu: mtu)
    let connected = Mutex(false)
    let property = { (name: String, value: @escaping @Sendable () -> DBusValue) in
      ExportedProperty(name: name, signature: value().signature, access: .read) { value() }
    }
    try host.connection.export(
      ExportedObject(interfaces: [
        ExportedInterface(
          name: Device1.interface,
          properties: [
            property("Address") { .string(address.rawValue) },
            property("AddressType") { .string("public") },
            property("Adapter") { .objectPath(SimulationHost.adapterPath) },
            property("Connected") { .bool(connected.withLock { $0 }) },
            property("Paired") { .bool(false) },
            property("Trusted") { .bool(false) },
          ])
      ]), at: central.path)
    connected.withLock { $0 = true }
    try host.connection.emitPropertiesChanged(
      path: central.path, interface: Device1.interface, changed: ["Connected": .bool(true)])
    return central
  }

  /// Returns once the app has registered at least one GATT application (its services).
  public func waitUntilServicesRegistered(timeout: Duration = .seconds(10)) async throws {
    try await host.state.wait("the app registered its services", timeout: timeout) {
      !$0.applications.isEmpty
    }
  }

  /// Returns once the app advertises (an advertisement is registered).
  public func waitUntilAdvertising(timeout: Duration = .seconds(10)) async throws {
    try await host.state.wait("the app advertises", timeout: timeout) {
      !$0.advertisements.isEmpty
    }
  }

  /// The local name of the app's advertisements (`LocalName`), those registered now.
  public var advertisedNames: [String] {
    host.state.read { $0.advertisements.values.compactMap { $0["LocalName"]?.stringValue } }
  }
}
