"""A stand-in for bluetoothd on a private bus, for scripts/bench-path: one powered adapter
(/org/bluez/hci0). Each StartDiscovery after the first (`blekit scan` restarts its discovery
every 2 s) is followed by one new device, sent as bluetoothd sends it (InterfacesAdded with
Device1's usual properties), framed by callgrind dumps: "before-N" 0.3 s after the start,
the signal 0.2 s later, "report-N" 0.5 s after the signal (before the next restart)."""
import asyncio
import os
import subprocess
import sys

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

ADAPTER = "/org/bluez/hci0"
SERVICE = "0000fff0-0000-1000-8000-00805f9b34fb"
COUNT = int(os.environ.get("REPORTS", "3"))
state = {"discovering": False, "starts": 0}


def adapter_properties():
    return {
        "Address": Variant("s", "00:AA:01:00:00:23"), "AddressType": Variant("s", "public"),
        "Name": Variant("s", "bench"), "Alias": Variant("s", "bench"), "Class": Variant("u", 0),
        "Powered": Variant("b", True), "PowerState": Variant("s", "on"),
        "Discoverable": Variant("b", False), "DiscoverableTimeout": Variant("u", 180),
        "Pairable": Variant("b", False), "PairableTimeout": Variant("u", 0),
        "Discovering": Variant("b", state["discovering"]),
        "UUIDs": Variant("as", ["00001800-0000-1000-8000-00805f9b34fb"]),
        "Modalias": Variant("s", "usb:v1D6Bp0246d0542"),
        "Roles": Variant("as", ["central", "peripheral"]),
    }


def device(n):
    """Device n's path and interfaces, with the properties bluetoothd 5.66 sends for the lab
    benchmark's advertiser (one service, a local name; the emulator's RSSI is 127, "unknown",
    and its reports carry no flags), in its order (dbus-monitor in the lab)."""
    address = "00:AA:01:01:00:%02X" % n
    properties = {
        "Address": Variant("s", address), "AddressType": Variant("s", "public"),
        "Name": Variant("s", "bench-%d" % n), "Alias": Variant("s", "bench-%d" % n),
        "Paired": Variant("b", False), "Bonded": Variant("b", False),
        "Trusted": Variant("b", False), "Blocked": Variant("b", False),
        "LegacyPairing": Variant("b", False), "RSSI": Variant("n", 127),
        "Connected": Variant("b", False), "UUIDs": Variant("as", [SERVICE]),
        "Adapter": Variant("o", ADAPTER), "ServicesResolved": Variant("b", False),
    }
    path = ADAPTER + "/dev_" + address.replace(":", "_")
    return path, {"org.freedesktop.DBus.Introspectable": {}, "org.bluez.Device1": properties,
                  "org.freedesktop.DBus.Properties": {}}


def dump(label):
    subprocess.run(["callgrind_control", "-d", label], capture_output=True, check=False)


async def main():
    bus = await MessageBus(bus_address=os.environ["DBUS_SYSTEM_BUS_ADDRESS"]).connect()
    await bus.request_name("org.bluez")

    def discovering(value):
        state["discovering"] = value
        bus.send(Message(message_type=MessageType.SIGNAL, path=ADAPTER,
                         interface="org.freedesktop.DBus.Properties", member="PropertiesChanged",
                         signature="sa{sv}as",
                         body=["org.bluez.Adapter1", {"Discovering": Variant("b", value)}, []]))

    async def report(n):
        await asyncio.sleep(0.3)
        dump("before-%d" % n)
        await asyncio.sleep(0.2)
        path, interfaces = device(n)
        bus.send(Message(message_type=MessageType.SIGNAL, path="/",
                         interface="org.freedesktop.DBus.ObjectManager", member="InterfacesAdded",
                         signature="oa{sa{sv}}", body=[path, interfaces]))
        await asyncio.sleep(0.5)
        dump("report-%d" % n)
        print("report", n, flush=True)

    def handle(message):
        if message.message_type != MessageType.METHOD_CALL:
            return None
        call = (message.interface, message.member)
        if call == ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"):
            interfaces = {"org.freedesktop.DBus.Introspectable": {},
                          "org.bluez.Adapter1": adapter_properties(),
                          "org.freedesktop.DBus.Properties": {}}
            return Message.new_method_return(message, "a{oa{sa{sv}}}", [{ADAPTER: interfaces}])
        if call == ("org.bluez.Adapter1", "SetDiscoveryFilter"):
            return Message.new_method_return(message)
        if call == ("org.bluez.Adapter1", "StartDiscovery"):
            discovering(True)
            state["starts"] += 1
            if 1 < state["starts"] <= COUNT + 1:
                asyncio.get_running_loop().create_task(report(state["starts"] - 1))
            return Message.new_method_return(message)
        if call == ("org.bluez.Adapter1", "StopDiscovery"):
            discovering(False)
            return Message.new_method_return(message)
        if call == ("org.freedesktop.DBus.Properties", "GetAll"):
            return Message.new_method_return(message, "a{sv}", [adapter_properties()])
        if call == ("org.freedesktop.DBus.Properties", "Get"):
            return Message.new_method_return(message, "v", [adapter_properties()[message.body[1]]])
        print("fake bluetoothd: unexpected call", message.path, call, file=sys.stderr, flush=True)
        return Message.new_error(message, "org.freedesktop.DBus.Error.UnknownMethod",
                                 "not in this stand-in")

    bus.add_message_handler(handle)
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
