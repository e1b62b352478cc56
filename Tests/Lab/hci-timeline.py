#!/usr/bin/env python3
# hci-timeline.py CAPTURE [LAST]: the advertising and scanning switches and the links' starts
# and ends in a btmon capture (btmon -w: BTSnoop, monitor format), one line each, the last LAST
# (default all). btmon -r of BlueZ 5.66 crashes part-way through the lab's captures (a segfault
# while it decodes ATT), so the suites read the records themselves: only HCI commands and
# events, whose layout is the Core specification's.
import datetime
import struct
import sys

COMMANDS = {
    0x200A: "LE Set Advertise Enable",
    0x200C: "LE Set Scan Enable",
    0x2039: "LE Set Extended Advertising Enable",
    0x2042: "LE Set Extended Scan Enable",
    0x0406: "Disconnect",
}
# Monitor-format opcodes (the record's flags): 2 a command, 3 an event.
COMMAND, EVENT = 2, 3
# BTSnoop timestamps count microseconds from year 0; this is 1970-01-01.
EPOCH_OFFSET = 0x00DCDDB30F2F8000


def records(data):
    position = 16
    while position + 24 <= len(data):
        _, included, flags, _, stamp = struct.unpack(">IIIIq", data[position:position + 24])
        body = data[position + 24:position + 24 + included]
        position += 24 + included
        yield flags & 0xFFFF, flags >> 16, stamp, body


def describe(kind, body):
    if kind == COMMAND and len(body) >= 4:
        opcode = body[0] | body[1] << 8
        name = COMMANDS.get(opcode)
        if name is None:
            return None
        if opcode == 0x0406:
            return f"command {name} handle {body[3] | body[4] << 8 if len(body) >= 5 else '?'}"
        return f"command {name}: {'on' if body[3] else 'off'}"
    if kind == EVENT and len(body) >= 3:
        if body[0] == 0x05 and len(body) >= 6:
            return f"event Disconnection Complete handle {body[3] | body[4] << 8} reason 0x{body[5]:02x}"
        if body[0] == 0x3E and body[2] in (0x01, 0x0A) and len(body) >= 7:
            role = "central" if body[6] == 0 else "peripheral"
            return f"event LE Connection Complete status 0x{body[3]:02x} as {role}"
        if body[0] == 0x0E and len(body) >= 6:
            opcode = body[3] | body[4] << 8
            if opcode in COMMANDS and body[5] != 0:
                return f"event {COMMANDS[opcode]} failed: status 0x{body[5]:02x}"
    return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: hci-timeline.py CAPTURE [LAST]")
    with open(sys.argv[1], "rb") as capture:
        data = capture.read()
    if not data.startswith(b"btsnoop\0"):
        sys.exit(f"{sys.argv[1]}: not a BTSnoop capture")
    lines = []
    for kind, index, stamp, body in records(data):
        text = describe(kind, body)
        if text is None:
            continue
        when = datetime.datetime.fromtimestamp(
            (stamp - EPOCH_OFFSET) / 1e6, datetime.timezone.utc)
        lines.append(f"{when:%H:%M:%S.%f}"[:-3] + f" hci{index} {text}")
    last = int(sys.argv[2]) if len(sys.argv) == 3 else len(lines)
    print("\n".join(lines[-last:]) if last else "", end="\n" if lines and last else "")


main()
