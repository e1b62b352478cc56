"""A stand-in bluetoothd on a private bus for scripts/bench-scan: one powered adapter
(/org/bluez/hci0) and, from the first StartDiscovery on, a flood of advertisements:

  per generation: DEVICES distinct devices appear (InterfacesAdded, Device1 as bluetoothd 5.66
  sends it, with RSSI and a FolkBears-shaped ManufacturerData: company 0xFFFF, 02 10, then a
  16-byte ID unique to the device), then CHANGES PropertiesChanged (RSSI and ManufacturerData,
  round robin over the generation's devices), then, unless KEEP=1, every one of them vanishes
  (InterfacesRemoved, as bluetoothd does once a temporary device is not heard for
  TemporaryTimeout, 30 s by default).

After GENERATIONS generations (default 1) a last device named END (ID all 0xEE) appears, and
"flood done" is printed: a central that prints it has read everything before it. Discovery
starts, stops and filters are accepted at any time (blekit restarts its discovery every 2 s).
RATE (signals per second, default 0: as fast as the bus takes them) paces the flood.
Prints "ready" when the bus name is owned."""
import asyncio
import os
import sys
import time

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from patient_socket import patient  # noqa: E402

ADAPTER = "/org/bluez/hci0"
PROPERTIES = "org.freedesktop.DBus.Properties"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
DEVICES = int(os.environ.get("DEVICES", "10000"))
CHANGES = int(os.environ.get("CHANGES", "100000"))
GENERATIONS = int(os.environ.get("GENERATIONS", "1"))
KEEP = os.environ.get("KEEP") == "1"
RATE = float(os.environ.get("RATE", "0"))


def adapter(discovering):
    return {
        "Address": Variant("s", "00:AA:01:00:00:00"), "AddressType": Variant("s", "public"),
        "Name": Variant("s", "bench"), "Alias": Variant("s", "bench"), "Class": Variant("u", 0),
        "Powered": Variant("b", True), "PowerState": Variant("s", "on"),
        "Discoverable": Variant("b", False), "DiscoverableTimeout": Variant("u", 180),
        "Pairable": Variant("b", False), "PairableTimeout": Variant("u", 0),
        "Discovering": Variant("b", discovering),
        "UUIDs": Variant("as", ["00001801-0000-1000-8000-00805f9b34fb"]),
        "Roles": Variant("as", ["central", "peripheral"]),
    }


def identity(generation, index):
    """Device (generation, index)'s path, address and 16-byte ID."""
    number = generation * 1_000_000 + index
    octets = [0xC0 | (generation & 0x3F), (index >> 24) & 0xFF, (index >> 16) & 0xFF,
              (index >> 8) & 0xFF, index & 0xFF, 0x42]
    address = ":".join("%02X" % o for o in octets)
    path = ADAPTER + "/dev_" + address.replace(":", "_")
    return path, address, number.to_bytes(8, "big") * 2


def manufacturer(ident):
    return Variant("a{qv}", {0xFFFF: Variant("ay", bytes([0x02, 0x10]) + ident)})


def device(path, address, ident, name):
    return {
        "org.freedesktop.DBus.Introspectable": {},
        "org.bluez.Device1": {
            "Address": Variant("s", address), "AddressType": Variant("s", "random"),
            "Name": Variant("s", name), "Alias": Variant("s", name),
            "Paired": Variant("b", False), "Bonded": Variant("b", False),
            "Trusted": Variant("b", False), "Blocked": Variant("b", False),
            "LegacyPairing": Variant("b", False), "RSSI": Variant("n", -60),
            "Connected": Variant("b", False), "UUIDs": Variant("as", []),
            "Adapter": Variant("o", ADAPTER), "ManufacturerData": manufacturer(ident),
            "ServicesResolved": Variant("b", False),
        },
        PROPERTIES: {},
    }


async def flood(bus):
    sent = 0

    started = time.monotonic()

    async def send(message):
        nonlocal sent
        bus.send(message)
        sent += 1
        if RATE and sent % 50 == 0:
            # Paced: a reader slower than the flood would otherwise leave it all queued here.
            await asyncio.sleep(max(0.0, sent / RATE - (time.monotonic() - started)))
        elif sent % 200 == 0:
            await asyncio.sleep(0)  # let the transport write

    def signal(path, interface, member, signature, body):
        return Message(message_type=MessageType.SIGNAL, path=path, interface=interface,
                       member=member, signature=signature, body=body)

    for generation in range(GENERATIONS):
        identities = [identity(generation, i) for i in range(DEVICES)]
        for i, (path, address, ident) in enumerate(identities):
            await send(signal("/", OBJECT_MANAGER, "InterfacesAdded", "oa{sa{sv}}",
                              [path, device(path, address, ident, "dev-%d" % i)]))
        for k in range(CHANGES):
            path, _, ident = identities[k % DEVICES]
            rssi = -40 - (k % 50)
            await send(signal(path, PROPERTIES, "PropertiesChanged", "sa{sv}as", [
                "org.bluez.Device1",
                {"RSSI": Variant("n", rssi), "ManufacturerData": manufacturer(ident)}, []]))
        if not KEEP:
            for path, _, _ in identities:
                await send(signal("/", OBJECT_MANAGER, "InterfacesRemoved", "oas", [
                    path, ["org.freedesktop.DBus.Introspectable", "org.bluez.Device1",
                           PROPERTIES]]))
    path, address, _ = identity(63, 0xFFFFFF)
    await send(signal("/", OBJECT_MANAGER, "InterfacesAdded", "oa{sa{sv}}",
                      [path, device(path, address, b"\xee" * 16, "END")]))
    print("flood done: %d signals" % sent, flush=True)


async def main():
    bus = await MessageBus(bus_address=os.environ["DBUS_SYSTEM_BUS_ADDRESS"]).connect()
    patient(bus)
    state = {"discovering": False, "flooding": None}

    def changed(value):
        state["discovering"] = value
        bus.send(Message(message_type=MessageType.SIGNAL, path=ADAPTER, interface=PROPERTIES,
                         member="PropertiesChanged", signature="sa{sv}as",
                         body=["org.bluez.Adapter1", {"Discovering": Variant("b", value)}, []]))

    def handle(message):
        if message.message_type != MessageType.METHOD_CALL:
            return None
        call = (message.interface, message.member)
        ok = Message.new_method_return(message)
        if call == (OBJECT_MANAGER, "GetManagedObjects"):
            objects = {ADAPTER: {"org.freedesktop.DBus.Introspectable": {}, PROPERTIES: {},
                                 "org.bluez.Adapter1": adapter(state["discovering"])}}
            return Message.new_method_return(message, "a{oa{sa{sv}}}", [objects])
        if call == (PROPERTIES, "GetAll") and message.path == ADAPTER:
            return Message.new_method_return(message, "a{sv}", [adapter(state["discovering"])])
        if call == (PROPERTIES, "Get") and message.path == ADAPTER:
            return Message.new_method_return(
                message, "v", [adapter(state["discovering"])[message.body[1]]])
        if call in (("org.bluez.Adapter1", "SetDiscoveryFilter"),
                    ("org.bluez.Adapter1", "RemoveDevice")):
            return ok
        if call == ("org.bluez.Adapter1", "GetDiscoveryFilters"):
            return Message.new_method_return(message, "as", [["UUIDs", "RSSI", "Transport",
                                                              "DuplicateData"]])
        if call == ("org.bluez.Adapter1", "StartDiscovery"):
            changed(True)
            if state["flooding"] is None:
                # After the reply: a central subscribes before it starts discovery.
                loop = asyncio.get_running_loop()
                state["flooding"] = loop.call_later(
                    0.5, lambda: loop.create_task(flood(bus)))
            return ok
        if call == ("org.bluez.Adapter1", "StopDiscovery"):
            changed(False)
            return ok
        print("fake_flood: unexpected call", message.path, call, file=sys.stderr, flush=True)
        return Message.new_error(message, "org.bluez.Error.NotSupported", "not in this stand-in")

    bus.add_message_handler(handle)
    await bus.request_name("org.bluez")
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
