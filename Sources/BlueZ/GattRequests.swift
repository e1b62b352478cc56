// What bluetoothd tells a local GATT attribute when a central reads, writes or subscribes.
import DBus

/// The option keys bluetoothd passes to ReadValue, WriteValue, AcquireNotify and AcquireWrite.
enum GattOption {
  static let offset = "offset"
  static let mtu = "mtu"
  static let device = "device"
  static let link = "link"
  static let type = "type"
  static let prepareAuthorize = "prepare-authorize"
}

/// A read of a local characteristic or descriptor (`org.bluez.GattCharacteristic1.ReadValue`).
public struct GattReadRequest: Sendable, Hashable {
  /// Where in the value the read starts; a long read asks again with growing offsets.
  public var offset: Int
  /// The ATT MTU of the central's connection, when bluetoothd says.
  public var mtu: Int?
  /// The central's `org.bluez.Device1` object.
  public var device: ObjectPath?
  /// "LE" or "BR/EDR".
  public var link: String?

  public init(offset: Int = 0, mtu: Int? = nil, device: ObjectPath? = nil, link: String? = nil) {
    self.offset = offset
    self.mtu = mtu
    self.device = device
    self.link = link
  }

  init(options: [String: DBusValue]) {
    self.init(
      offset: options[GattOption.offset]?.uint16Value.map(Int.init) ?? 0,
      mtu: options[GattOption.mtu]?.uint16Value.map(Int.init),
      device: options[GattOption.device]?.objectPathValue,
      link: options[GattOption.link]?.stringValue)
  }
}

/// How a central wrote (the `type` option of `WriteValue`).
public enum GattWriteType: String, Sendable, Hashable {
  /// Write without response (ATT Write Command).
  case command
  /// Write with response (ATT Write Request).
  case request
  /// Reliable (queued, then executed) write.
  case reliable
}

/// A write to a local characteristic or descriptor (`org.bluez.GattCharacteristic1.WriteValue`).
public struct GattWriteRequest: Sendable, Hashable {
  public var value: [UInt8]
  public var offset: Int
  /// How the central wrote; nil when bluetoothd does not say (older versions).
  public var type: GattWriteType?
  public var mtu: Int?
  public var device: ObjectPath?
  public var link: String?
  /// True when bluetoothd only asks to authorize a prepared write; the value is not final.
  public var prepareAuthorize: Bool

  public init(
    value: [UInt8], offset: Int = 0, type: GattWriteType? = nil, mtu: Int? = nil,
    device: ObjectPath? = nil, link: String? = nil, prepareAuthorize: Bool = false
  ) {
    self.value = value
    self.offset = offset
    self.type = type
    self.mtu = mtu
    self.device = device
    self.link = link
    self.prepareAuthorize = prepareAuthorize
  }

  init(value: [UInt8], options: [String: DBusValue]) {
    self.init(
      value: value,
      offset: options[GattOption.offset]?.uint16Value.map(Int.init) ?? 0,
      type: options[GattOption.type]?.stringValue.flatMap(GattWriteType.init(rawValue:)),
      mtu: options[GattOption.mtu]?.uint16Value.map(Int.init),
      device: options[GattOption.device]?.objectPathValue,
      link: options[GattOption.link]?.stringValue,
      prepareAuthorize: options[GattOption.prepareAuthorize]?.boolValue ?? false)
  }
}

/// Our end of the socket pair handed to bluetoothd by `AcquireNotify` or `AcquireWrite`.
///
/// For notify: each `send` of at most 512 bytes on ``socket`` becomes one notification to every
/// subscribed central; bluetoothd closes its end (a hang-up here) when the last central
/// unsubscribes or disconnects. For write: each datagram read is one write without response.
/// The socket is `SOCK_SEQPACKET`, non-blocking and close-on-exec.
public struct GattAcquiredSocket: Sendable {
  /// Our end; closed when the last reference goes unless taken.
  public let socket: FileDescriptor
  /// The ATT MTU bluetoothd reported for the first central (`mtu` option), at least 23.
  public let mtu: Int
  public let device: ObjectPath?
  public let link: String?

  /// The largest value one notification (or one write without response) can carry:
  /// min(MTU - 3, 512); an attribute value holds at most 512 bytes.
  public var maximumValueLength: Int { Swift.min(mtu - 3, 512) }
}

/// The handlers' shapes.
public typealias GattReadHandler =
  @Sendable (GattReadRequest) async throws(GattRequestError) -> [UInt8]
public typealias GattWriteHandler =
  @Sendable (GattWriteRequest) async throws(GattRequestError) -> Void
public typealias GattAcquireHandler =
  @Sendable (GattAcquiredSocket) async throws(GattRequestError) -> Void
