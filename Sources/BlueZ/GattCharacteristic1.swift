// org.bluez.GattCharacteristic1: read, write, notifications, and the acquired sockets.
import DBus

/// A typed proxy for a remote `org.bluez.GattCharacteristic1`
/// (BlueZ's `doc/org.bluez.GattCharacteristic.rst`).
public struct GattCharacteristic1: BlueZProxy {
  public static let interface = BlueZ.Interface.gattCharacteristic

  public let snapshot: ProxySnapshot
  public init(snapshot: ProxySnapshot) { self.snapshot = snapshot }

  // MARK: Properties

  /// The characteristic UUID, a lowercase 128-bit string.
  public static let uuid = ProxyProperty<Self, String>(
    "UUID", "s", required: true, decode: Decode.string)
  /// The service the characteristic belongs to.
  public static let service = ProxyProperty<Self, ObjectPath>(
    "Service", "o", required: true, decode: Decode.path)
  /// The cached value, updated by reads and notifications.
  public static let value = ProxyProperty<Self, [UInt8]>("Value", "ay", decode: Decode.bytes)
  /// Properties such as `read`, `write`, `write-without-response`, `notify`, `indicate`.
  public static let flags = ProxyProperty<Self, [String]>(
    "Flags", "as", required: true, decode: Decode.strings)
  /// The ATT MTU of the link (BlueZ 5.62 and later).
  public static let mtu = ProxyProperty<Self, UInt16>("MTU", "q", decode: Decode.uint16)
  public static let notifying = ProxyProperty<Self, Bool>("Notifying", "b", decode: Decode.bool)
  /// Whether some client holds the AcquireNotify socket.
  public static let notifyAcquired = ProxyProperty<Self, Bool>(
    "NotifyAcquired", "b", decode: Decode.bool)
  /// Whether some client holds the AcquireWrite socket.
  public static let writeAcquired = ProxyProperty<Self, Bool>(
    "WriteAcquired", "b", decode: Decode.bool)
  public static let handle = ProxyProperty<Self, UInt16>("Handle", "q", decode: Decode.uint16)

  public static let propertyTable: [PropertyRow] = [
    uuid.row, service.row, value.row, flags.row, mtu.row, notifying.row, notifyAcquired.row,
    writeAcquired.row, handle.row,
  ]

  // MARK: Methods

  /// Reads the value, from `offset`.
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.ReadValue`.
  public func readValue(offset: UInt16 = 0) async throws(BlueZError) -> [UInt8] {
    var options: [String: DBusValue] = [:]
    if offset != 0 { options["offset"] = .uint16(offset) }
    let reply = try await call(
      "ReadValue", [.dictionaryOfVariants(options)], timeout: BlueZ.gattCallTimeout)
    guard let bytes = reply.first?.bytesValue else {
      throw BlueZError(.unexpectedValue, "ReadValue on \(path) did not return bytes")
    }
    return bytes
  }

  /// Writes the value, as a write request (acknowledged) or a write command (no response).
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.WriteValue`.
  public func writeValue(
    _ value: [UInt8], type: WriteType = .request, offset: UInt16 = 0
  ) async throws(BlueZError) {
    var options: [String: DBusValue] = ["type": .string(type.rawValue)]
    if offset != 0 { options["offset"] = .uint16(offset) }
    _ = try await call(
      "WriteValue", [.bytes(value), .dictionaryOfVariants(options)],
      timeout: BlueZ.gattCallTimeout)
  }

  /// Subscribes; values then arrive as PropertiesChanged(Value).
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.StartNotify`.
  public func startNotify() async throws(BlueZError) {
    _ = try await call("StartNotify", timeout: BlueZ.gattCallTimeout)
  }

  /// Ends the StartNotify subscription of this client.
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.StopNotify`.
  public func stopNotify() async throws(BlueZError) {
    _ = try await call("StopNotify", timeout: BlueZ.gattCallTimeout)
  }

  /// Subscribes through a socket: each read of the returned fd yields one notification.
  /// Closing the fd unsubscribes. The corresponding D-Bus member is
  /// `org.bluez.GattCharacteristic1.AcquireNotify`.
  public func acquireNotify() async throws(BlueZError) -> AcquiredSocket {
    try await acquire("AcquireNotify")
  }

  /// Gets a socket for write commands: each write to the fd sends one value.
  /// The corresponding D-Bus member is `org.bluez.GattCharacteristic1.AcquireWrite`.
  public func acquireWrite() async throws(BlueZError) -> AcquiredSocket {
    try await acquire("AcquireWrite")
  }

  private func acquire(_ member: MemberName) async throws(BlueZError) -> AcquiredSocket {
    let reply = try await call(
      member, [.dictionaryOfVariants([:])], timeout: BlueZ.gattCallTimeout)
    guard reply.count == 2, let fd = reply[0].fileDescriptorValue, let mtu = reply[1].uint16Value
    else {
      throw BlueZError(.unexpectedValue, "\(member) on \(path) did not return (h, q)")
    }
    return AcquiredSocket(fileDescriptor: fd, mtu: mtu)
  }
}

/// The kind of write for `GattCharacteristic1.WriteValue` (its `type` option).
public enum WriteType: String, Sendable {
  /// A write request, acknowledged by the peer.
  case request
  /// A write command (write without response).
  case command
  /// A reliable write.
  case reliable
}

/// A socket handed out by AcquireNotify or AcquireWrite (a SOCK_SEQPACKET), with the MTU that
/// bounds one value.
public struct AcquiredSocket: Sendable {
  /// The fd, owned by this value until taken.
  public let fileDescriptor: FileDescriptor
  /// The ATT MTU bluetoothd reported for the link.
  public let mtu: UInt16
}
