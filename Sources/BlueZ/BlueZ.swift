// Names shared by every BlueZ proxy and exported object: the service, its root, its interfaces.
import DBus

/// Constants of BlueZ's D-Bus API (see BlueZ's `doc/org.bluez.*.rst`).
public enum BlueZ {
  /// The well-known bus name bluetoothd owns on the system bus.
  public static let service: BusName = "org.bluez"
  /// The object that implements `org.freedesktop.DBus.ObjectManager` for all of BlueZ's objects.
  public static let root: ObjectPath = "/"
  /// The default adapter name when the user picks none.
  public static let defaultAdapter = "hci0"

  /// How long a remote GATT call (ReadValue, WriteValue, StartNotify, AcquireNotify...) waits
  /// for bluetoothd's reply: 40 s, past ATT's 30 s transaction timeout (Core Vol 3 Part F
  /// 3.3.3). A request the peer leaves unanswered holds its bearer, and every call queued
  /// behind it, until that timeout; bluetoothd then answers the call (often by completing it
  /// on another EATT bearer). A shorter wait gives up on a call bluetoothd is about to
  /// answer and leaves it pending inside bluetoothd for a client that is gone.
  public static let gattCallTimeout: Duration = .seconds(40)

  /// The interfaces blekit talks to or implements.
  public enum Interface {
    public static let adapter: InterfaceName = "org.bluez.Adapter1"
    public static let device: InterfaceName = "org.bluez.Device1"
    public static let gattService: InterfaceName = "org.bluez.GattService1"
    public static let gattCharacteristic: InterfaceName = "org.bluez.GattCharacteristic1"
    public static let gattDescriptor: InterfaceName = "org.bluez.GattDescriptor1"
    public static let gattManager: InterfaceName = "org.bluez.GattManager1"
    public static let advertisingManager: InterfaceName = "org.bluez.LEAdvertisingManager1"
    public static let advertisement: InterfaceName = "org.bluez.LEAdvertisement1"
    public static let agentManager: InterfaceName = "org.bluez.AgentManager1"
    public static let agent: InterfaceName = "org.bluez.Agent1"
    public static let properties: InterfaceName = "org.freedesktop.DBus.Properties"
    public static let objectManager: InterfaceName = "org.freedesktop.DBus.ObjectManager"
  }
}
