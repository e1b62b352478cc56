// A descriptor of a local GATT characteristic, exported as org.bluez.GattDescriptor1.
import DBus

/// A descriptor in a ``GattApplication``: a UUID, flags and the handlers that answer
/// bluetoothd's `ReadValue` and `WriteValue`.
///
/// BlueZ adds the Client Characteristic Configuration and Extended Properties descriptors
/// itself; do not declare them here.
public struct LocalDescriptor: Sendable {
  /// The D-Bus interface this value is exported as.
  public static let interface = BlueZ.Interface.gattDescriptor

  /// The descriptor's UUID as BlueZ spells it (16-bit short form or 128-bit string).
  public var uuid: String
  public var flags: [GattFlag]
  /// Answers reads; nil refuses them with `org.bluez.Error.NotSupported`.
  public var read: GattReadHandler?
  /// Takes writes; nil refuses them with `org.bluez.Error.NotSupported`.
  public var write: GattWriteHandler?

  public init(
    uuid: String, flags: [GattFlag], read: GattReadHandler? = nil, write: GattWriteHandler? = nil
  ) {
    self.uuid = uuid
    self.flags = flags
    self.read = read
    self.write = write
  }
}
