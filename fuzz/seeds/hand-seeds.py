#!/usr/bin/env python3
"""Writes the hand-made seeds of the D-Bus fuzz targets, for what the lab capture lacks: the
Agent1 calls other than RequestAuthorization, WriteValue's options, a PropertiesChanged of
ManufacturerData and ServiceData, a device added, changed and removed in one input, a
duplicated Device1 entry, and a byte inside 64 variants (the deepest libdbus accepts).

    fuzz/seeds/hand-seeds.py --into fuzz/corpus

Each is a record as fuzz/support/FuzzMessages.swift reads it (a shape index, a 16-bit body
length, the little-endian body) or a raw message; the shape indexes are those of the lists in
fuzz/bluez-readers and fuzz/dbus-reader.
"""

import argparse
import os
import struct

# Shape indexes (fuzz/bluez-readers/FuzzBlueZReaders.swift, bluezShapes).
ADDED, REMOVED, CHANGED, MANAGED = 0, 1, 2, 3
AGENT = {"RequestPinCode": 4, "DisplayPinCode": 5, "RequestPasskey": 6, "DisplayPasskey": 7,
         "RequestConfirmation": 8, "RequestAuthorization": 9, "AuthorizeService": 10}
READ, WRITE, ACQUIRE = 11, 12, 13
# fuzz/dbus-reader/FuzzDBusReader.swift, readerShapes: the same first four, then these.
READER_WRITE = 5


class Body:
    """A little-endian D-Bus body, written value by value with the wire format's alignment."""

    def __init__(self):
        self.data = bytearray()

    def align(self, n):
        self.data += b"\0" * (-len(self.data) % n)

    def write(self, signature, value):
        code = signature[0]
        if code == "y":
            self.data.append(value)
        elif code in "nq":
            self.align(2)
            self.data += struct.pack("<h" if code == "n" else "<H", value)
        elif code in "iub":
            self.align(4)
            self.data += struct.pack("<i" if code == "i" else "<I", int(value))
        elif code in "so":
            self.align(4)
            raw = value.encode()
            self.data += struct.pack("<I", len(raw)) + raw + b"\0"
        elif code == "g":
            self.data += bytes([len(value)]) + value.encode() + b"\0"
        elif code == "v":
            inner, content = value
            self.write("g", inner)
            self.write(inner, content)
        elif signature.startswith("a{"):
            key, item = split_entry(signature[2:-1])
            self.array(8, [(key, k, item, v) for k, v in value], entry=True)
        elif code == "a":
            element = signature[1:]
            self.array(alignment(element), [(element, v) for v in value])
        else:
            raise ValueError(signature)

    def array(self, element_alignment, items, entry=False):
        self.align(4)
        at = len(self.data)
        self.data += b"\0\0\0\0"
        self.align(element_alignment)
        start = len(self.data)
        for item in items:
            if entry:
                self.align(8)
                self.write(item[0], item[1])
                self.write(item[2], item[3])
            else:
                self.write(*item)
        struct.pack_into("<I", self.data, at, len(self.data) - start)


def alignment(signature):
    return {"y": 1, "g": 1, "v": 1, "n": 2, "q": 2, "x": 8, "t": 8, "d": 8, "(": 8, "{": 8}.get(
        signature[0], 4)


def split_entry(inner):
    """'sa{sv}' -> ('s', 'a{sv}'): a dictionary entry's key and value types."""
    return inner[0], inner[1:]


def body(*arguments):
    b = Body()
    for signature, value in arguments:
        b.write(signature, value)
    return bytes(b.data)


def record(shape, data):
    return bytes([shape]) + struct.pack("<H", len(data)) + data


DEVICE = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
DEVICE1 = [
    ("Address", ("s", "00:AA:01:01:00:01")), ("AddressType", ("s", "public")),
    ("Adapter", ("o", "/org/bluez/hci0")), ("Connected", ("b", False)), ("RSSI", ("n", -60)),
    ("TxPower", ("n", 4)), ("Name", ("s", "blekit")),
    ("UUIDs", ("as", ["e20a39f4-73f5-4bc4-a12f-17d1ad07a961"])),
    ("ManufacturerData", ("a{qv}", [(0xFFFF, ("ay", [1, 2]))])),
    ("ServiceData", ("a{sv}", [("0000180f-0000-1000-8000-00805f9b34fb", ("ay", [0x64]))])),
]


def bluez_seeds():
    seeds = {}
    added = body(("o", DEVICE), ("a{sa{sv}}", [("org.bluez.Device1", DEVICE1),
                                                ("org.freedesktop.DBus.Properties", [])]))
    changed = body(("s", "org.bluez.Device1"), ("a{sv}", [
        ("RSSI", ("n", -48)), ("ManufacturerData", ("a{qv}", [(0xFFFF, ("ay", [3, 4, 5]))])),
        ("ServiceData", ("a{sv}", [("180f", ("ay", [0x50]))]))]), ("as", ["TxPower"]))
    removed = body(("o", DEVICE), ("as", ["org.bluez.Device1", "org.freedesktop.DBus.Properties"]))
    seeds["hand-device-life"] = (record(ADDED, added) + record(CHANGED, changed)
                                 + record(REMOVED, removed))
    seeds["hand-changed-manufacturer-service-data"] = record(CHANGED, changed)
    seeds["hand-device1-twice"] = record(ADDED, body(("o", DEVICE), ("a{sa{sv}}", [
        ("org.bluez.Device1", DEVICE1), ("org.bluez.Device1", [("Name", ("s", "again"))])])))
    seeds["hand-managed-objects"] = record(MANAGED, body(("a{oa{sa{sv}}}", [
        ("/org/bluez", [("org.bluez.AgentManager1", [])]),
        (DEVICE, [("org.bluez.Device1", DEVICE1)])])))
    calls = {
        "RequestPinCode": [("o", DEVICE)],
        "DisplayPinCode": [("o", DEVICE), ("s", "123456")],
        "RequestPasskey": [("o", DEVICE)],
        "DisplayPasskey": [("o", DEVICE), ("u", 123456), ("q", 2)],
        "RequestConfirmation": [("o", DEVICE), ("u", 999999)],
        "AuthorizeService": [("o", DEVICE), ("s", "0000180f-0000-1000-8000-00805f9b34fb")],
    }
    for member, arguments in calls.items():
        seeds["hand-agent-" + member] = record(AGENT[member], body(*arguments))
    options = [("offset", ("q", 4)), ("mtu", ("q", 517)), ("device", ("o", DEVICE)),
               ("link", ("s", "LE")), ("type", ("s", "request")),
               ("prepare-authorize", ("b", True))]
    seeds["hand-write-value"] = record(WRITE, body(("ay", [1, 2, 3]), ("a{sv}", options)))
    seeds["hand-read-value"] = record(READ, body(("a{sv}", options[:4])))
    seeds["hand-acquire-notify"] = record(ACQUIRE, body(("a{sv}", options[1:4])))
    return seeds


def deep_variants(count):
    """A METHOD_RETURN whose one argument is a byte inside `count` variants."""
    data = b"\x01v\0" * (count - 1) + b"\x01y\0\x2a"
    fields = bytes([5, 1]) + b"u\0" + struct.pack("<I", 1) + bytes([8, 1]) + b"g\0\x01v\0"
    message = b"l\x02\x00\x01" + struct.pack("<III", len(data), 1, len(fields)) + fields
    return message + b"\0" * (-len(message) % 8) + data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--into", required=True)
    arguments = parser.parse_args()
    bluez = bluez_seeds()
    reader = {
        "hand-write-value": bluez["hand-write-value"][:0] + bytes([READER_WRITE])
        + bluez["hand-write-value"][1:],
        "hand-changed-manufacturer-service-data": bluez["hand-changed-manufacturer-service-data"],
        "hand-device1-twice": bluez["hand-device1-twice"],
        "hand-variants-64": deep_variants(64),
    }
    for target, seeds in (("bluez-readers", bluez), ("dbus-reader", reader)):
        directory = os.path.join(arguments.into, target)
        os.makedirs(directory, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(directory, name), "wb") as seed:
                seed.write(data)
            print(f"{target}/{name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
