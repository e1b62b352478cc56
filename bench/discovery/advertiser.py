#!/usr/bin/python3
# The advertiser of scripts/bench-discovery (runs inside the lab, dbus-python + GLib): registers
# and unregisters one LE advertisement of the transfer service on an adapter, on command, and
# says when each call returned, on CLOCK_MONOTONIC (shared by every process in the guest).
#
#   advertiser.py [--adapter hci1] [--folkbears ID-HEX]
#   stdin:  "register" | "unregister" | "quit", one per line
#   stdout: "registered T" | "unregistered T" | "error NAME", T = time.monotonic() at the reply
#
# With --folkbears, the advertisement carries manufacturer data of company 0xFFFF in the
# FolkBears layout (0x02, 0x10, 16-byte ID) instead of the service UUID (both do not fit in 31
# bytes). Registration is done here rather than by `blekit advertise` so that the moment it returns is
# known exactly: that moment is where every scanner's latency starts.
import argparse
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

SERVICE = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
PATH = "/org/blekit/bench/adv0"


class Advertisement(dbus.service.Object):
    def __init__(self, bus, path, folkbears):
        super().__init__(bus, path)
        self.folkbears = folkbears

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="s",
                         out_signature="a{sv}")
    def GetAll(self, interface):
        if self.folkbears:
            payload = dbus.Array(b"\x02\x10" + self.folkbears, signature="y")
            return {
                "Type": dbus.String("peripheral"),
                "ManufacturerData": dbus.Dictionary({dbus.UInt16(0xFFFF): payload},
                                                    signature="qv"),
            }
        # Discoverable sets the LE General Discoverable flag: without it, bluetoothd hides the
        # advertiser from a discovery that has no filter (`bluetoothctl scan on` as is).
        return {
            "Type": dbus.String("peripheral"),
            "ServiceUUIDs": dbus.Array([SERVICE], signature="s"),
            "LocalName": dbus.String("bench"),
            "Discoverable": dbus.Boolean(True),
        }

    @dbus.service.method("org.bluez.LEAdvertisement1")
    def Release(self):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--folkbears", type=bytes.fromhex, help="16-byte ID in hex")
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    Advertisement(bus, PATH, args.folkbears)
    manager = dbus.Interface(bus.get_object("org.bluez", f"/org/bluez/{args.adapter}"),
                             "org.bluez.LEAdvertisingManager1")
    loop = GLib.MainLoop()

    def say(text):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def failed(error):
        say(f"error {error.get_dbus_name()}")

    def on_line(source, condition):
        line = sys.stdin.readline()
        command = line.strip()
        if not line or command == "quit":
            loop.quit()
            return False
        if command == "register":
            manager.RegisterAdvertisement(
                dbus.ObjectPath(PATH), dbus.Dictionary({}, signature="sv"),
                reply_handler=lambda: say(f"registered {time.monotonic():.6f}"),
                error_handler=failed)
        elif command == "unregister":
            manager.UnregisterAdvertisement(
                dbus.ObjectPath(PATH),
                reply_handler=lambda: say(f"unregistered {time.monotonic():.6f}"),
                error_handler=failed)
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, on_line)
    say("ready")
    loop.run()


if __name__ == "__main__":
    main()
