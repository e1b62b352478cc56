#!/usr/bin/env python3
"""Splits a bus capture (dbus-monitor --system --binary, from fuzz/seeds/lab-capture.sh) into
seed files for the D-Bus fuzz targets: one raw message per file, as the targets read them.

    fuzz/seeds/split-capture.py results/capture/bus.bin --into fuzz/corpus

Keeps what bluetoothd sends on every change and what blekit reads of it: ObjectManager and
Properties signals, method returns holding dictionaries (GetManagedObjects, GetAll), Agent1
calls and GATT calls (ReadValue, WriteValue, Acquire*). At most --per-kind files per kind of
message (type, interface, member, signature, the PropertiesChanged interface), each with a
body of its own; the
bluez-readers target also gets the sequence of bluetoothd's ObjectManager signals and the
devices' PropertiesChanged as one input (up to --max-size bytes), so the replayed tree sees
objects appear, change and go. Prints what it wrote.
"""

import argparse
import os
import struct
import sys

TYPES = {1: "call", 2: "return", 3: "error", 4: "signal"}


def messages(data):
    """Yields (bytes, header fields) for each message of a capture."""
    offset = 0
    while offset + 16 <= len(data):
        endian = "<" if data[offset : offset + 1] == b"l" else ">"
        body_length, _, fields_length = struct.unpack_from(endian + "III", data, offset + 4)
        length = ((16 + fields_length + 7) & ~7) + body_length
        message = data[offset : offset + length]
        offset += length
        if len(message) < length:
            break
        yield message, fields(message, endian, fields_length)


def fields(message, endian, length):
    """The header fields PATH, INTERFACE, MEMBER, SIGNATURE (and the type) of a message."""
    result = {"type": TYPES.get(message[1], "?")}
    names = {1: "path", 2: "interface", 3: "member", 6: "destination", 7: "sender", 8: "signature"}
    offset, end = 16, 16 + length
    while offset < end:
        offset = (offset + 7) & ~7
        if offset >= end:
            break
        code, signature_length = message[offset], message[offset + 1]
        signature = message[offset + 2 : offset + 2 + signature_length].decode()
        offset += 3 + signature_length
        if signature in ("s", "o"):
            offset = (offset + 3) & ~3
            (size,) = struct.unpack_from(endian + "I", message, offset)
            value = message[offset + 4 : offset + 4 + size].decode(errors="replace")
            offset += 4 + size + 1
        elif signature == "g":
            size = message[offset]
            value = message[offset + 1 : offset + 1 + size].decode()
            offset += 1 + size + 1
        elif signature == "u":
            offset = (offset + 3) & ~3
            (value,) = struct.unpack_from(endian + "I", message, offset)
            offset += 4
        else:
            break
        if code in names:
            result[names[code]] = value
    return result


def first_string(message, endian="<"):
    """The first argument of a body that starts with a string (PropertiesChanged's interface)."""
    fields_length = struct.unpack_from(endian + "I", message, 12)[0]
    start = (16 + fields_length + 7) & ~7
    (size,) = struct.unpack_from(endian + "I", message, start)
    return message[start + 4 : start + 4 + size].decode(errors="replace")


def wanted(header):
    """The seed's name stem, or None for a message the targets do not read."""
    interface = header.get("interface", "")
    member = header.get("member", "")
    signature = header.get("signature", "")
    kind = header["type"]
    if kind == "signal" and interface == "org.freedesktop.DBus.ObjectManager":
        return member
    if kind == "signal" and member == "PropertiesChanged":
        return member
    if kind == "call" and interface in ("org.bluez.Agent1", "org.bluez.GattCharacteristic1",
                                        "org.bluez.GattDescriptor1"):
        return member + "-" + interface.rsplit(".", 1)[-1]
    if kind == "return" and "a{" in signature:
        names = {"a{oa{sa{sv}}}": "GetManagedObjects", "a{sv}": "GetAll"}
        return "reply-" + names.get(signature, "".join(c for c in signature if c.isalpha()))
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture")
    parser.add_argument("--into", required=True, help="the corpus directory (fuzz/corpus)")
    parser.add_argument("--per-kind", type=int, default=3)
    parser.add_argument("--max-size", type=int, default=4096, help="skip larger messages")
    arguments = parser.parse_args()
    data = open(arguments.capture, "rb").read()
    counts = {}
    bodies = set()
    written = []
    sequence = b""
    for message, header in messages(data):
        stem = wanted(header)
        if stem is None or len(message) > arguments.max_size:
            continue
        kind = (header["type"], header.get("interface"), stem, header.get("signature"))
        if stem == "PropertiesChanged":
            interface = first_string(message)
            kind += (interface,)
            stem += "-" + interface.rsplit(".", 1)[-1]
        if header["type"] == "signal" and header.get("sender", "").startswith(":") and (
            len(sequence) + len(message) <= arguments.max_size
        ):
            # A device's life: added, changed, removed.
            if "/dev_" in header.get("path", "") or header.get("member") != "PropertiesChanged":
                sequence += message
        body = message[((16 + struct.unpack_from("<I", message, 12)[0] + 7) & ~7) :]
        if (kind, body) in bodies:
            continue
        bodies.add((kind, body))
        counts[kind] = counts.get(kind, 0) + 1
        if counts[kind] > arguments.per_kind:
            continue
        name = f"lab-{stem}-{counts[kind]}"
        for target in ("dbus-reader", "bluez-readers"):
            directory = os.path.join(arguments.into, target)
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, name), "wb") as seed:
                seed.write(message)
        written.append(f"{name} ({len(message)} bytes)")
    if sequence:
        with open(os.path.join(arguments.into, "bluez-readers", "lab-signal-sequence"), "wb") as f:
            f.write(sequence)
        written.append(f"lab-signal-sequence ({len(sequence)} bytes, bluez-readers only)")
    print("\n".join(written) or "no message kept", file=sys.stdout)


if __name__ == "__main__":
    main()
