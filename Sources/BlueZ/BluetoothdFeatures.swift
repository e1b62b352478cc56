// BluetoothdFeatures: what the running bluetoothd does with a GATT server's notify sockets and
// which [GATT] Channels it defaults to: behaviours no interface or property reveals, so they
// follow from its release (BluetoothdVersion), each with the release that changed it.
import DBus

/// How bluetoothd behaves where nothing on D-Bus tells, decided from its release.
///
/// Each rule names the BlueZ source it comes from (`src/gatt-database.c`, `src/main.c`); with
/// no version known, every rule takes the oldest behaviour blekit supports (BlueZ 5.66), so
/// that nothing is promised that bluetoothd may not keep.
public struct BluetoothdFeatures: Sendable, Hashable {
  /// How a GATT server's `AcquireNotify` sockets relate to the centrals.
  public enum NotifySockets: Sendable, Hashable {
    /// One socket per characteristic, asked for when the first central subscribes; a value
    /// written to it goes to every subscribed central (BlueZ up to 5.68).
    case shared
    /// One socket per subscribed central (`AcquireNotify` once per device, with its `device`
    /// option), but a value written to any of them still goes to every subscribed central
    /// (5.69 to 5.75).
    case perDeviceToAll
    /// One socket per subscribed central, and a value written to it goes to that central
    /// only (from 5.76).
    case perDevice
  }

  /// How bluetoothd reports a central's confirmation of an indication sent through a notify
  /// socket.
  public enum SocketConfirmations: Sendable, Hashable {
    /// It calls the characteristic's `Confirm` method, naming nobody (up to 5.75).
    case confirmMethod
    /// Not at all (5.76 to 5.79: the socket path lost its confirmation callback).
    case none
    /// It writes one byte, 0x01, to that central's socket (from 5.80).
    case socketByte
  }

  /// The release these rules were decided from; `nil` when it could not be read.
  public var version: BluetoothdVersion?

  public init(version: BluetoothdVersion?) { self.version = version }

  /// The first release with per-device notify sockets.
  public static let perDeviceSocketsSince = BluetoothdVersion(5, 69)
  /// The first release whose per-device socket reaches only its own central.
  public static let perDeviceDeliverySince = BluetoothdVersion(5, 76)
  /// The first release that writes indication confirmations to the notify socket.
  public static let socketConfirmationsSince = BluetoothdVersion(5, 80)
  /// The first release whose `[GATT] Channels` defaults to 1 (EATT off).
  public static let singleChannelDefaultSince = BluetoothdVersion(5, 67)

  public var notifySockets: NotifySockets {
    guard let version else { return .shared }
    if version >= Self.perDeviceDeliverySince { return .perDevice }
    if version >= Self.perDeviceSocketsSince { return .perDeviceToAll }
    return .shared
  }

  public var socketConfirmations: SocketConfirmations {
    guard let version else { return .confirmMethod }
    if version >= Self.socketConfirmationsSince { return .socketByte }
    if version >= Self.perDeviceDeliverySince { return .none }
    return .confirmMethod
  }

  /// `[GATT] Channels` when main.conf does not set it: 3 up to 5.66 (EATT on), 1 from 5.67.
  /// Unknown version: 3, the value that does not promise ordered notifications.
  public var defaultGATTChannels: Int {
    guard let version, version >= Self.singleChannelDefaultSince else { return 3 }
    return 1
  }

  /// The largest `[GATT] Channels` bluetoothd takes: 5 up to 5.66 (larger values clamped to
  /// 5), 6 from 5.67 (values out of 1...6 ignored, the default kept).
  public var maximumGATTChannels: Int {
    guard let version, version >= Self.singleChannelDefaultSince else { return 5 }
    return 6
  }

  /// Whether an out-of-range `Channels` is clamped (5.66) rather than ignored (from 5.67).
  public var clampsGATTChannels: Bool {
    guard let version else { return true }
    return version < Self.singleChannelDefaultSince
  }

  /// Where these rules come from, for messages: `bluetoothd 5.82` or `bluetoothd of unknown
  /// version`.
  public var source: String {
    version.map { "bluetoothd \($0)" } ?? "bluetoothd of unknown version"
  }

  /// Reads the version of the bluetoothd that owns `org.bluez` (``BluetoothdVersion/read(on:)``).
  public static func read(on connection: DBusConnection) async -> BluetoothdFeatures {
    BluetoothdFeatures(version: await BluetoothdVersion.read(on: connection))
  }
}
