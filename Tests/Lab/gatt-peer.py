#!/usr/bin/python3
# A GATT peripheral for the lab tests of blekit's GATT verbs, written against BlueZ's D-Bus API
# with dbus-python + GLib, independent of blekit. Runs inside the lab VM with the system's
# python3 (python3-dbus, python3-gi):
#
#   gatt-peer.py [--adapter hci1] [--name gatt-peer]
#
# Registers one application and one advertisement (type peripheral, the test service UUID,
# the local name) on the adapter, prints "ready" on stdout once both are registered, and
# serves until SIGTERM/SIGINT; SIGUSR1 registers the advertisement anew. Every read is printed
# on stdout as "read UUID offset N", every value written as "write UUID HEX".
#
# Service 7b1e0000-9c1f-4d2a-8f3e-5a6b7c8d9e00 (test service):
#   ...01 long      read             512 bytes of text (the most an attribute holds); honours
#                                    the read offset (read-blob), an offset past the end
#                                    answers InvalidOffset
#                   descriptor 2901  "long value" (Characteristic User Description)
#   ...02 text      read, write      "hello gatt-peer"; a write replaces it
#   ...03 counter   read, notify     one byte, +1 every 300 ms while someone is subscribed
#   ...04 secret    read             every read answers org.bluez.Error.NotAuthorized
#   ...05 sink      write            write-only
# Service 181a (Environmental Sensing):
#   2a6e Temperature  read           0x0968 little-endian (24.08 degrees C)
import argparse
import signal
import sys

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"
SERVICE_IF = "org.bluez.GattService1"
CHAR_IF = "org.bluez.GattCharacteristic1"
DESC_IF = "org.bluez.GattDescriptor1"
ADV_IF = "org.bluez.LEAdvertisement1"
TEST_SERVICE = "7b1e0000-9c1f-4d2a-8f3e-5a6b7c8d9e00"
LONG_VALUE = ("0123456789abcdefghijklmnopqrstuvwxyz" * 15)[:512].encode()


def test_uuid(suffix):
    return TEST_SERVICE[:-2] + suffix


def say(text):
    print(text, flush=True)


class BluezError(dbus.exceptions.DBusException):
    def __init__(self, name, message):
        super().__init__(message, name="org.bluez.Error." + name)


def byte_array(data):
    return dbus.Array([dbus.Byte(b) for b in data], signature="y")


def read_offset(options):
    return int(options.get("offset", 0))


class Node(dbus.service.Object):
    """One exported object: its interface name and its properties."""

    interface = None

    def __init__(self, bus, path):
        self.path = path
        super().__init__(bus, path)

    def properties(self):
        raise NotImplementedError

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != self.interface:
            raise BluezError("InvalidArguments", "no such interface")
        return self.properties()


class Service(Node):
    interface = SERVICE_IF

    def __init__(self, bus, path, uuid):
        super().__init__(bus, path)
        self.uuid = uuid
        self.characteristics = []

    def properties(self):
        return {"UUID": self.uuid, "Primary": dbus.Boolean(True)}


class Characteristic(Node):
    interface = CHAR_IF

    def __init__(self, bus, path, service, uuid, flags, value=b""):
        super().__init__(bus, path)
        self.service = service
        self.uuid = uuid
        self.flags = flags
        self.value = bytes(value)
        self.descriptors = []
        self.notifying = False
        service.characteristics.append(self)

    def properties(self):
        return {
            "UUID": self.uuid,
            "Service": dbus.ObjectPath(self.service.path),
            "Flags": dbus.Array(self.flags, signature="s"),
        }

    @dbus.service.method(CHAR_IF, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        offset = read_offset(options)
        say(f"read {self.uuid} offset {offset}")
        if offset > len(self.value):
            raise BluezError("InvalidOffset", "offset past the end")
        return byte_array(self.value[offset:])

    @dbus.service.method(CHAR_IF, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        self.value = bytes(value)
        say(f"write {self.uuid} {self.value.hex()}")

    @dbus.service.method(CHAR_IF)
    def StartNotify(self):
        self.notifying = True

    @dbus.service.method(CHAR_IF)
    def StopNotify(self):
        self.notifying = False

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def notify(self, value):
        self.value = bytes(value)
        if self.notifying:
            self.PropertiesChanged(CHAR_IF, {"Value": byte_array(self.value)}, [])


class Secret(Characteristic):
    @dbus.service.method(CHAR_IF, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        raise BluezError("NotAuthorized", "the secret is not for you")


class Descriptor(Node):
    interface = DESC_IF

    def __init__(self, bus, path, characteristic, uuid, value):
        super().__init__(bus, path)
        self.characteristic = characteristic
        self.uuid = uuid
        self.value = bytes(value)
        characteristic.descriptors.append(self)

    def properties(self):
        return {
            "UUID": self.uuid,
            "Characteristic": dbus.ObjectPath(self.characteristic.path),
            "Flags": dbus.Array(["read"], signature="s"),
        }

    @dbus.service.method(DESC_IF, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        return byte_array(self.value[read_offset(options):])


class Application(dbus.service.Object):
    def __init__(self, bus, path):
        self.path = path
        self.services = []
        super().__init__(bus, path)

    @dbus.service.method(OM, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {}
        for service in self.services:
            objects[dbus.ObjectPath(service.path)] = {SERVICE_IF: service.properties()}
            for char in service.characteristics:
                objects[dbus.ObjectPath(char.path)] = {CHAR_IF: char.properties()}
                for desc in char.descriptors:
                    objects[dbus.ObjectPath(desc.path)] = {DESC_IF: desc.properties()}
        return objects


class Advertisement(Node):
    interface = ADV_IF

    def __init__(self, bus, path, name):
        super().__init__(bus, path)
        self.name = name

    def properties(self):
        return {
            "Type": "peripheral",
            "ServiceUUIDs": dbus.Array([TEST_SERVICE], signature="s"),
            "LocalName": self.name,
        }

    @dbus.service.method(ADV_IF)
    def Release(self):
        pass


def build(bus):
    app = Application(bus, "/org/gattpeer")
    test = Service(bus, "/org/gattpeer/service0", TEST_SERVICE)
    long_char = Characteristic(
        bus, test.path + "/char0", test, test_uuid("01"), ["read"], LONG_VALUE)
    Descriptor(bus, long_char.path + "/desc0", long_char, "2901", b"long value")
    Characteristic(bus, test.path + "/char1", test, test_uuid("02"), ["read", "write"],
                   b"hello gatt-peer")
    counter = Characteristic(bus, test.path + "/char2", test, test_uuid("03"),
                             ["read", "notify"], b"\x00")
    Secret(bus, test.path + "/char3", test, test_uuid("04"), ["read"])
    Characteristic(bus, test.path + "/char4", test, test_uuid("05"), ["write"])
    env = Service(bus, "/org/gattpeer/service1", "0000181a-0000-1000-8000-00805f9b34fb")
    Characteristic(bus, env.path + "/char0", env, "00002a6e-0000-1000-8000-00805f9b34fb",
                   ["read"], b"\x68\x09")
    app.services = [test, env]

    def tick():
        counter.notify(bytes([(counter.value[0] + 1) % 256]))
        return True

    GLib.timeout_add(300, tick)
    return app


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--name", default="gatt-peer")
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    adapter = bus.get_object(BLUEZ, "/org/bluez/" + args.adapter)
    app = build(bus)
    adv = Advertisement(bus, "/org/gattpeer/adv0", args.name)
    loop = GLib.MainLoop()
    pending = {"count": 2}

    def registered():
        pending["count"] -= 1
        if pending["count"] == 0:
            say("ready")

    def failed(error):
        print(f"gatt-peer: registration failed: {error}", file=sys.stderr, flush=True)
        loop.quit()

    dbus.Interface(adapter, "org.bluez.GattManager1").RegisterApplication(
        app.path, {}, reply_handler=registered, error_handler=failed)
    dbus.Interface(adapter, "org.bluez.LEAdvertisingManager1").RegisterAdvertisement(
        adv.path, {}, reply_handler=registered, error_handler=failed)
    manager = dbus.Interface(adapter, "org.bluez.LEAdvertisingManager1")

    def readvertise():
        # Unregister and register the advertisement again (the application stays): the
        # emulator sends advertising reports only when advertising starts.
        try:
            manager.UnregisterAdvertisement(adv.path)
        except dbus.exceptions.DBusException:
            pass
        manager.RegisterAdvertisement(adv.path, {}, reply_handler=lambda: say("readvertised"),
                                      error_handler=failed)
        return True

    for number in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, number, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGUSR1, readvertise)
    loop.run()


if __name__ == "__main__":
    main()
