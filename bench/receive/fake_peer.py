"""A stand-in bluetoothd on a private bus for scripts/bench-receive: one powered adapter
(/org/bluez/hci0) and one device serving the transfer service (Apple's sample: the plain
characteristic notifies chunks, then the literal EOM). The message is MESSAGE_BYTES bytes
(default 1 MiB) of a fixed pattern, sent in CHUNK-byte values (default 244, an ATT
notification at MTU 247).

The device is known from the start (so a central can connect by address) and announced again
on every StartDiscovery after a RemoveDevice (blekit receive removes cached devices first).
While discovering it is reported every 0.5 s. Connect exports the service, then sets ServicesResolved, as bluetoothd does. Both ways of
subscribing work:
  AcquireNotify: a SOCK_SEQPACKET socket pair, one datagram per value (bluetoothd's way);
  StartNotify: one PropertiesChanged(Value) signal per value.
Every subscription gets the whole message. Prints "ready" when the bus name is owned, and one
line per subscription on stderr; with MESSAGE_OUT=FILE it writes the message there first.
With INTERVAL_MS=N it sends one value every N milliseconds (a slow link, where each value
reaches the central on its own) instead of as fast as the central reads. Nothing here is
timed: a central's instructions per KiB are what scripts/bench-receive measures."""
import asyncio
import fcntl
import os
import socket
import struct
import sys
import termios
import threading
import time

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from patient_socket import patient  # noqa: E402

ADAPTER = "/org/bluez/hci0"
ADDRESS = "00:AA:01:01:00:01"
DEVICE = ADAPTER + "/dev_" + ADDRESS.replace(":", "_")
SERVICE = DEVICE + "/service0010"
CHARACTERISTIC = SERVICE + "/char0011"
SERVICE_UUID = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
PLAIN_UUID = "08590f7e-db05-467e-8757-72f6faeb13d4"
MTU = 247
OUTQ_LIMIT = 40_000  # bytes of kernel memory (about 31 values of 244 bytes)
INTERVAL = float(os.environ.get("INTERVAL_MS", "0")) / 1000


def outq(sock):
    """The kernel memory of our values still unread by the central (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
PROPERTIES = "org.freedesktop.DBus.Properties"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"


def message_bytes():
    """The message: a fixed pattern that never contains the literal EOM."""
    size = int(os.environ.get("MESSAGE_BYTES", str(1 << 20)))
    pattern = bytes((i * 7 + 13) % 251 for i in range(251)).replace(b"EOM", b"eom")
    return (pattern * (size // len(pattern) + 1))[:size]


def chunks(message):
    size = int(os.environ.get("CHUNK", "244"))
    return [message[i:i + size] for i in range(0, len(message), size)] + [b"EOM"]


class Peer:
    def __init__(self, bus):
        self.bus = bus
        self.values = chunks(message_bytes())
        self.known = True
        self.connected = False
        self.resolved = False
        self.notifying = False
        self.acquired = False
        self.discovering = False
        self.sockets = []

    def adapter(self):
        return {
            "Address": Variant("s", "00:AA:01:00:00:00"), "AddressType": Variant("s", "public"),
            "Name": Variant("s", "bench"), "Alias": Variant("s", "bench"),
            "Class": Variant("u", 0), "Powered": Variant("b", True),
            "PowerState": Variant("s", "on"), "Discoverable": Variant("b", False),
            "DiscoverableTimeout": Variant("u", 180), "Pairable": Variant("b", False),
            "PairableTimeout": Variant("u", 0), "Discovering": Variant("b", self.discovering),
            "UUIDs": Variant("as", ["00001801-0000-1000-8000-00805f9b34fb"]),
            "Roles": Variant("as", ["central", "peripheral"]),
        }

    def device(self):
        return {
            "Address": Variant("s", ADDRESS), "AddressType": Variant("s", "public"),
            "Name": Variant("s", "transfer"), "Alias": Variant("s", "transfer"),
            "Paired": Variant("b", False), "Bonded": Variant("b", False),
            "Trusted": Variant("b", False), "Blocked": Variant("b", False),
            "LegacyPairing": Variant("b", False), "RSSI": Variant("n", -50),
            "Connected": Variant("b", self.connected), "UUIDs": Variant("as", [SERVICE_UUID]),
            "Adapter": Variant("o", ADAPTER), "ServicesResolved": Variant("b", self.resolved),
        }

    def service(self):
        return {"UUID": Variant("s", SERVICE_UUID), "Device": Variant("o", DEVICE),
                "Primary": Variant("b", True), "Includes": Variant("ao", []),
                "Handle": Variant("q", 0x10)}

    def characteristic(self):
        return {"UUID": Variant("s", PLAIN_UUID), "Service": Variant("o", SERVICE),
                "Value": Variant("ay", b""), "Notifying": Variant("b", self.notifying),
                "NotifyAcquired": Variant("b", self.acquired),
                "Flags": Variant("as", ["write-without-response", "notify"]),
                "Handle": Variant("q", 0x11), "MTU": Variant("q", MTU)}

    def interfaces(self, path):
        common = {"org.freedesktop.DBus.Introspectable": {}, PROPERTIES: {}}
        if path == ADAPTER:
            return {**common, "org.bluez.Adapter1": self.adapter()}
        if path == DEVICE:
            return {**common, "org.bluez.Device1": self.device()}
        if path == SERVICE:
            return {**common, "org.bluez.GattService1": self.service()}
        if path == CHARACTERISTIC:
            return {**common, "org.bluez.GattCharacteristic1": self.characteristic()}
        return None

    def paths(self):
        paths = [ADAPTER]
        if self.known:
            paths.append(DEVICE)
        if self.resolved:
            paths += [SERVICE, CHARACTERISTIC]
        return paths

    def signal(self, path, interface, member, signature, body):
        self.bus.send(Message(message_type=MessageType.SIGNAL, path=path, interface=interface,
                              member=member, signature=signature, body=body))

    def changed(self, path, interface, properties):
        self.signal(path, PROPERTIES, "PropertiesChanged", "sa{sv}as",
                    [interface, properties, []])

    def added(self, path):
        self.signal("/", OBJECT_MANAGER, "InterfacesAdded", "oa{sa{sv}}",
                    [path, self.interfaces(path)])

    def removed(self, path):
        self.signal("/", OBJECT_MANAGER, "InterfacesRemoved", "oas",
                    [path, list(self.interfaces(path))])

    def connect(self):
        if not self.connected:
            self.connected = True
            self.changed(DEVICE, "org.bluez.Device1", {"Connected": Variant("b", True)})
        if not self.resolved:
            self.resolved = True
            self.added(SERVICE)
            self.added(CHARACTERISTIC)
            self.changed(DEVICE, "org.bluez.Device1", {"ServicesResolved": Variant("b", True)})

    def disconnect(self):
        for end in self.sockets:
            end.close()
        self.sockets = []
        if self.resolved:
            self.resolved = False
            self.changed(DEVICE, "org.bluez.Device1", {"ServicesResolved": Variant("b", False)})
        if self.connected:
            self.connected = False
            self.changed(DEVICE, "org.bluez.Device1", {"Connected": Variant("b", False)})
        self.notifying = self.acquired = False

    def acquire(self, message):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sockets.append(ours)
        self.acquired = True
        values = self.values

        def send():
            # At most OUTQ_LIMIT bytes of kernel memory queued at once, as a radio paces
            # bluetoothd: a socket kept full would make blekit refuse the plain message (its
            # loss check suspects a drop from 85,196 bytes, README), which no real link at
            # this rate would cause.
            try:
                for value in values:
                    while outq(ours) > OUTQ_LIMIT:
                        time.sleep(0.001)
                    ours.send(value)
                    if INTERVAL:
                        time.sleep(INTERVAL)
            except OSError:
                pass  # the central closed its end (it unsubscribed)

        threading.Thread(target=send, daemon=True).start()
        reply = Message.new_method_return(message, "hq", [0, MTU], unix_fds=[theirs.fileno()])
        # The reply is written after this handler returns: close our copy of their end later.
        asyncio.get_running_loop().call_later(2, theirs.close)
        self.changed(CHARACTERISTIC, "org.bluez.GattCharacteristic1",
                     {"NotifyAcquired": Variant("b", True)})
        print("fake_peer: AcquireNotify, %d values" % len(values), file=sys.stderr, flush=True)
        return reply

    async def notify(self):
        for value in self.values:
            if not self.notifying:
                return
            self.changed(CHARACTERISTIC, "org.bluez.GattCharacteristic1",
                         {"Value": Variant("ay", value)})
            await asyncio.sleep(INTERVAL)
        print("fake_peer: StartNotify, %d values" % len(self.values), file=sys.stderr, flush=True)

    async def advertise(self):
        """While discovering, the device is reported every 0.5 s, as an advertiser is: added
        when unknown, else an RSSI update."""
        while self.discovering:
            await asyncio.sleep(0.5)
            if not self.discovering or self.connected:
                return
            if not self.known:
                self.known = True
                self.added(DEVICE)
            else:
                self.changed(DEVICE, "org.bluez.Device1", {"RSSI": Variant("n", -50)})

    def handle(self, message):
        if message.message_type != MessageType.METHOD_CALL:
            return None
        path, call = message.path, (message.interface, message.member)
        ok = Message.new_method_return(message)
        if call == (OBJECT_MANAGER, "GetManagedObjects"):
            objects = {p: self.interfaces(p) for p in self.paths()}
            return Message.new_method_return(message, "a{oa{sa{sv}}}", [objects])
        if call == (PROPERTIES, "GetAll") and path in self.paths():
            return Message.new_method_return(
                message, "a{sv}", [self.interfaces(path).get(message.body[0], {})])
        if call == (PROPERTIES, "Get") and path in self.paths():
            value = self.interfaces(path).get(message.body[0], {}).get(message.body[1])
            if value is not None:
                return Message.new_method_return(message, "v", [value])
        if call == ("org.bluez.Adapter1", "SetDiscoveryFilter"):
            return ok
        if call == ("org.bluez.Adapter1", "GetDiscoveryFilters"):
            return Message.new_method_return(message, "as", [["UUIDs", "RSSI", "Transport"]])
        if call == ("org.bluez.Adapter1", "StartDiscovery"):
            self.discovering = True
            self.changed(ADAPTER, "org.bluez.Adapter1", {"Discovering": Variant("b", True)})
            asyncio.get_running_loop().create_task(self.advertise())
            return ok
        if call == ("org.bluez.Adapter1", "StopDiscovery"):
            self.discovering = False
            self.changed(ADAPTER, "org.bluez.Adapter1", {"Discovering": Variant("b", False)})
            return ok
        if call == ("org.bluez.Adapter1", "RemoveDevice") and self.known:
            self.disconnect()
            self.removed(DEVICE)
            self.known = False
            return ok
        if path == DEVICE and call == ("org.bluez.Device1", "Connect"):
            self.connect()
            return ok
        if path == DEVICE and call == ("org.bluez.Device1", "Disconnect"):
            self.disconnect()
            return ok
        if path == CHARACTERISTIC and self.resolved:
            if call == ("org.bluez.GattCharacteristic1", "AcquireNotify"):
                return self.acquire(message)
            if call == ("org.bluez.GattCharacteristic1", "StartNotify"):
                self.notifying = True
                self.changed(CHARACTERISTIC, "org.bluez.GattCharacteristic1",
                             {"Notifying": Variant("b", True)})
                asyncio.get_running_loop().create_task(self.notify())
                return ok
            if call == ("org.bluez.GattCharacteristic1", "StopNotify"):
                self.notifying = False
                self.changed(CHARACTERISTIC, "org.bluez.GattCharacteristic1",
                             {"Notifying": Variant("b", False)})
                return ok
            if call == ("org.bluez.GattCharacteristic1", "WriteValue"):
                return ok
        print("fake_peer: unexpected call", path, call, file=sys.stderr, flush=True)
        return Message.new_error(message, "org.bluez.Error.NotSupported", "not in this stand-in")


async def main():
    bus = await MessageBus(bus_address=os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
                           negotiate_unix_fd=True).connect()
    patient(bus)
    peer = Peer(bus)
    if os.environ.get("MESSAGE_OUT"):
        with open(os.environ["MESSAGE_OUT"], "wb") as out:
            out.write(b"".join(peer.values[:-1]))
    bus.add_message_handler(peer.handle)
    await bus.request_name("org.bluez")
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
