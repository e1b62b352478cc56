#!/usr/bin/python3
# A small BLE central over BlueZ's D-Bus API (dbus-python + GLib), used by the lab tests of
# `blekit advertise`: it is independent of blekit's own central, so a bug cannot hide on both
# sides. Runs inside the lab VM with the system's python3 (python3-dbus, python3-gi).
#
#   peripheral-central.py [--adapter hci0] [--mode notify|acquire] [--framing plain|sequenced]
#                         [--reply TEXT] [--out FILE] [--timeout S] [--linger S]
#
# Finds a device advertising the transfer service, connects, subscribes to the chosen
# characteristic (StartNotify and PropertiesChanged, or AcquireNotify and its socket),
# collects values until the end marker (EOM, or the sequenced end frame), writes the message
# bytes to --out (or stdout), optionally writes a reply without response, unsubscribes and
# disconnects. Prints one summary line on stderr: chunks, bytes, out-of-order count.
# Exit: 0 done, 1 failure, 3 not found, 4 cut before the end.
import argparse
import faulthandler
import os
import signal
import socket
import struct
import sys
import time
import zlib

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

SERVICE = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
PLAIN = "08590f7e-db05-467e-8757-72f6faeb13d4"
SEQUENCED = "8eaae4b1-b2e1-4d09-b847-f21676e24277"
BLUEZ = "org.bluez"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"


def log(text):
    print(f"central: {text}", file=sys.stderr, flush=True)


class Central:
    def __init__(self, args):
        self.args = args
        self.bus = dbus.SystemBus()
        self.loop = GLib.MainLoop()
        self.adapter_path = f"/org/bluez/{args.adapter}"
        self.om = dbus.Interface(self.bus.get_object(BLUEZ, "/"), OM)
        self.values = []
        self.done = False
        self.exit = 1

    def objects(self):
        return self.om.GetManagedObjects()

    def wait(self, predicate, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return True
            ctx = self.loop.get_context()
            while ctx.pending():
                ctx.iteration(False)
            time.sleep(0.05)
        return predicate()

    def find_device(self):
        for path, ifaces in self.objects().items():
            dev = ifaces.get("org.bluez.Device1")
            if dev and str(dev.get("Adapter")) == self.adapter_path:
                uuids = [str(u).lower() for u in dev.get("UUIDs", [])]
                if SERVICE in uuids:
                    return path
        return None

    def run(self):
        adapter = dbus.Interface(self.bus.get_object(BLUEZ, self.adapter_path), "org.bluez.Adapter1")
        # Start from a clean slate: a device object left by an earlier run can be removed by
        # bluetoothd's temporary-device timeout in the middle of this one, and the emulator
        # does not report the same advertisement again (lab-notes).
        for path, ifaces in self.objects().items():
            dev = ifaces.get("org.bluez.Device1")
            if dev and str(dev.get("Adapter")) == self.adapter_path:
                try:
                    adapter.RemoveDevice(path)
                except dbus.DBusException:
                    pass
        adapter.SetDiscoveryFilter({"UUIDs": dbus.Array([SERVICE], "s"), "Transport": "le"})
        device_path = None
        deadline = time.monotonic() + self.args.timeout
        # Reports come when scanning is switched on: restart the scan until found.
        while device_path is None and time.monotonic() < deadline:
            adapter.StartDiscovery()
            if self.wait(lambda: self.find_device() is not None, 30):
                device_path = self.find_device()
            try:
                adapter.StopDiscovery()
            except dbus.DBusException:
                pass
        if device_path is None:
            log("no device advertising the transfer service")
            return 3
        log(f"found {device_path}")
        device = dbus.Interface(self.bus.get_object(BLUEZ, device_path), "org.bluez.Device1")
        device_props = dbus.Interface(self.bus.get_object(BLUEZ, device_path), PROPS)
        for attempt in range(3):
            try:
                device.Connect(timeout=30)
                break
            except dbus.DBusException as error:
                log(f"connect attempt {attempt + 1}: {error.get_dbus_name()}")
                time.sleep(1)
        resolved = self.wait(lambda: bool(device_props.Get("org.bluez.Device1", "ServicesResolved")), 30)
        if not resolved:
            log("services never resolved")
            return 1
        want = PLAIN if self.args.framing == "plain" else SEQUENCED
        char_path = self.find_char(device_path, want)
        if char_path is None:
            log(f"characteristic {want} not found")
            return 1
        char_obj = self.bus.get_object(BLUEZ, char_path)
        char = dbus.Interface(char_obj, "org.bluez.GattCharacteristic1")
        started = time.monotonic()
        # CLOCK_MONOTONIC is the VM's: comparable between two centrals' logs.
        log(f"subscribing at {started:.2f}")
        if self.args.mode == "notify":
            self.bus.add_signal_receiver(
                self.on_props, dbus_interface=PROPS, signal_name="PropertiesChanged",
                path=char_path)
            char.StartNotify()
            self.wait(lambda: self.done, self.args.timeout)
        else:
            fd, mtu = char.AcquireNotify(dbus.Dictionary({}, signature="sv"))
            sock = socket.socket(fileno=fd.take())
            sock.settimeout(1.0)
            deadline = time.monotonic() + self.args.timeout
            while not self.done and time.monotonic() < deadline:
                try:
                    data = sock.recv(1024)
                except socket.timeout:
                    continue
                if not data:
                    break
                self.on_value(bytes(data))
        elapsed = time.monotonic() - started
        log(f"message ended at {time.monotonic():.2f}")
        if self.done and self.args.linger > 0:
            # Stay subscribed after the end: whatever arrives now was meant for someone else.
            ended_at = len(self.values)
            until = time.monotonic() + self.args.linger
            if self.args.mode == "notify":
                self.wait(lambda: False, self.args.linger)
            else:
                while time.monotonic() < until:
                    try:
                        data = sock.recv(1024)
                    except socket.timeout:
                        continue
                    if not data:
                        break
                    self.values.append(bytes(data))
            extra = len(self.values) - ended_at
            del self.values[ended_at:]
            log(f"after the end, subscribed {self.args.linger:.0f} s more: {extra} values")
        message, disorder = self.assemble()
        if message is None:
            log(f"cut: {len(self.values)} values, {sum(map(len, self.values))} bytes")
            self.cleanup(char, device, sock if self.args.mode == "acquire" else None)
            return 4
        out = open(self.args.out, "wb") if self.args.out else sys.stdout.buffer
        out.write(message)
        out.flush()
        log(f"received {len(message)} bytes in {len(self.values)} values, {elapsed:.2f} s, "
            f"{disorder} out of order")
        if self.args.reply is not None:
            char_plain = self.find_char(device_path, PLAIN)
            reply_char = dbus.Interface(self.bus.get_object(BLUEZ, char_plain), "org.bluez.GattCharacteristic1")
            reply_char.WriteValue(dbus.Array(self.args.reply.encode(), "y"), {"type": "command"})
            log(f"replied {len(self.args.reply.encode())} bytes")
            time.sleep(0.5)
        self.cleanup(char, device, sock if self.args.mode == "acquire" else None)
        return 0

    def find_char(self, device_path, uuid):
        for path, ifaces in self.objects().items():
            ch = ifaces.get("org.bluez.GattCharacteristic1")
            if ch and path.startswith(device_path + "/") and str(ch["UUID"]).lower() == uuid:
                return path
        return None

    def cleanup(self, char, device, sock):
        try:
            if sock is not None:
                sock.close()
            else:
                char.StopNotify()
        except dbus.DBusException:
            pass
        time.sleep(0.3)
        try:
            device.Disconnect()
        except dbus.DBusException:
            pass

    def on_props(self, interface, changed, invalidated):
        if "Value" in changed:
            self.on_value(bytes(changed["Value"]))

    def on_value(self, value):
        self.values.append(value)
        if self.done:
            return
        if self.args.framing == "plain":
            if value == b"EOM":
                self.done = True
        elif len(value) >= 4 and value[0] & 0x80:
            self.done = True

    def assemble(self):
        """The message, and how many values arrived out of place (None if incomplete)."""
        if not self.done:
            return None, 0
        if self.args.framing == "plain":
            return b"".join(self.values[:-1]), 0
        frames = {}
        disorder = 0
        expected = 0
        end = None
        for value in self.values:
            control, _, seq = value[0], value[1], struct.unpack_from("<H", value, 2)[0]
            if control & 0x80:
                end = struct.unpack_from("<III", value, 4)
                continue
            if seq != expected:
                disorder += 1
            expected = seq + 1
            frames[seq] = value[4:]
        count, length, crc = end
        if len(frames) != count:
            return None, disorder
        message = b"".join(frames[i] for i in range(count))
        if len(message) != length or (zlib.crc32(message) & 0xFFFFFFFF) != crc:
            log("sequenced message fails its length or CRC check")
            return None, disorder
        return message, disorder


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--mode", choices=["notify", "acquire"], default="notify")
    parser.add_argument("--framing", choices=["plain", "sequenced"], default="plain")
    parser.add_argument("--reply")
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--linger", type=float, default=0,
                        help="stay subscribed this many seconds after the end, counting values")
    args = parser.parse_args()
    # Never hang a lab run: dump where we are and exit after the time allowed.
    faulthandler.dump_traceback_later(args.timeout * 2 + 30, exit=True)
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    sys.exit(Central(args).run())


if __name__ == "__main__":
    main()
