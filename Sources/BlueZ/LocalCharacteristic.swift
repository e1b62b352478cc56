// A local GATT characteristic, exported as org.bluez.GattCharacteristic1.
import DBus

/// A characteristic in a ``GattApplication``: UUID, flags, descriptors, and the handlers that
/// answer bluetoothd.
///
/// Notifications go one of two ways, chosen by which handlers are set:
/// - ``acquireNotify`` set: the exported object has the `NotifyAcquired` property, so bluetoothd
///   calls `AcquireNotify` when the first central subscribes and gets one end of a
///   `SOCK_SEQPACKET` socket pair; the handler gets the other end (``GattAcquiredSocket``) and
///   writes one notification per datagram. bluetoothd hangs up when the last central leaves.
/// - otherwise bluetoothd calls `StartNotify` / `StopNotify` (``startNotify`` / ``stopNotify``)
///   and each value sent through ``GattApplicationRegistration/notify(_:characteristic:)``
///   (a `PropertiesChanged` of `Value`) becomes a notification.
public struct LocalCharacteristic: Sendable {
  /// The D-Bus interface this value is exported as.
  public static let interface = BlueZ.Interface.gattCharacteristic

  /// The characteristic's UUID as BlueZ spells it (16-bit short form or 128-bit string).
  public var uuid: String
  public var flags: [GattFlag]
  public var descriptors: [LocalDescriptor]
  /// Answers `ReadValue`; nil refuses reads with `org.bluez.Error.NotSupported`.
  public var read: GattReadHandler?
  /// Takes `WriteValue`; nil refuses writes with `org.bluez.Error.NotSupported`.
  public var write: GattWriteHandler?
  /// Called on `StartNotify` (the first central subscribed, no socket).
  public var startNotify: (@Sendable () async -> Void)?
  /// Called on `StopNotify` (the last central unsubscribed).
  public var stopNotify: (@Sendable () async -> Void)?
  /// Takes our end of the notify socket; its presence adds the `NotifyAcquired` property.
  public var acquireNotify: GattAcquireHandler?
  /// Takes our end of the write socket; its presence adds the `WriteAcquired` property.
  public var acquireWrite: GattAcquireHandler?
  /// Called on `Confirm`: a central confirmed an indication sent through
  /// ``GattApplicationRegistration/notify(_:characteristic:)``. bluetoothd 5.66 calls it once
  /// per confirming central and does not say which one.
  public var confirm: (@Sendable () async -> Void)?

  public init(
    uuid: String, flags: [GattFlag], descriptors: [LocalDescriptor] = [],
    read: GattReadHandler? = nil, write: GattWriteHandler? = nil,
    startNotify: (@Sendable () async -> Void)? = nil,
    stopNotify: (@Sendable () async -> Void)? = nil,
    acquireNotify: GattAcquireHandler? = nil, acquireWrite: GattAcquireHandler? = nil,
    confirm: (@Sendable () async -> Void)? = nil
  ) {
    self.uuid = uuid
    self.flags = flags
    self.descriptors = descriptors
    self.read = read
    self.write = write
    self.startNotify = startNotify
    self.stopNotify = stopNotify
    self.acquireNotify = acquireNotify
    self.acquireWrite = acquireWrite
    self.confirm = confirm
  }

  /// True when the flags ask for notifications or indications.
  public var canNotify: Bool { flags.contains(.notify) || flags.contains(.indicate) }
}
