#!/usr/bin/python3
"""att_channels.py BTSNOOP: which L2CAP channels carried data on each LE link of a lab capture.

Reads the btmon capture of a lab run (results/.../btmon.btsnoop, btsnoop with the monitor
datalink: every controller of the guest, commands, events and ACL both ways), reassembles the
L2CAP frames of each LE link and prints, per link and per direction of each controller, every
channel that carried frames: its CID, the PSM and parameters of its credit-based connection
(from the LE signaling channel: MTU, MPS, initial credits), the L2CAP frames, the SDUs, how many
of those are ATT notifications (opcode 0x1b, or 0x23, Multiple Handle Value Notification, which
bluetoothd 5.66 sends to a client that sets that feature, as its own client does; at the start
of an SDU; on the fixed ATT channel, CID 4, every frame is one SDU) and the span from the first
frame to the last. It exists because
btmon -r of bluez 5.66 crashes on some captures of this lab.

The counts are lower bounds, not a census: the lab's btmon falls behind under TCG and the kernel
drops what its monitor socket cannot queue, without a mark in the capture (the btsnoop drop
counters stay 0). In the one-host run of 2026-12-05 06:20 (results/ceiling-20261205-060144-3409)
the capture held 2,224 sent ACL packets where the transfers alone needed about 10,000 (188-byte
frames), so most frames were missing, and SDU starts (hence notifications) cannot be told apart
once a frame is lost. What it does show is each credit-based channel's parameters when its
signaling was captured: there, MPS 188 and 4 initial credits for the kernel's MTU 672, MPS 188
and 3 credits for an EATT channel (MTU 517).
"""
import collections
import struct
import sys

MONITOR_DATALINK = 2001
OP_EVENT, OP_ACL_TX, OP_ACL_RX = 3, 4, 5
ATT_CID, LE_SIGNALING_CID = 4, 5
NOTIFICATIONS = (0x1B, 0x23)


def records(path):
    with open(path, "rb") as f:
        header = f.read(16)
        if header[:8] != b"btsnoop\0":
            sys.exit(f"{path}: not a btsnoop file")
        _, datalink = struct.unpack(">II", header[8:16])
        if datalink != MONITOR_DATALINK:
            sys.exit(f"{path}: datalink {datalink}, not btmon's monitor format")
        while True:
            head = f.read(24)
            if len(head) < 24:
                return
            _, included, flags, _, stamp = struct.unpack(">IIIIq", head)
            data = f.read(included)
            if len(data) < included:
                return
            yield flags >> 16, flags & 0xFFFF, stamp / 1e6, data


class Channel:
    def __init__(self):
        self.frames = self.bytes = self.sdus = self.notifications = 0
        self.first = self.last = None
        self.remaining = 0  # bytes still due of the SDU in progress (credit-based channels)


def main(path):
    links = {}  # (index, handle) -> link number on that controller
    counts = collections.defaultdict(int)  # index -> links seen
    started = {}  # (index, link) -> time of its connection
    partial = {}  # (index, direction, handle) -> [expected length, bytes so far]
    channels = collections.defaultdict(Channel)  # (index, link, direction, cid) -> Channel
    requests = {}  # (index, link, identifier) -> PSM of a credit-based connection request
    labels = {}  # (index, link, cid) -> description from the signaling channel
    for index, op, when, data in records(path):
        if op == OP_EVENT and len(data) >= 2 and data[0] == 0x3E and len(data) >= 6:
            # LE Meta: Connection Complete (0x01) or Enhanced Connection Complete (0x0a).
            if data[2] in (0x01, 0x0A) and data[3] == 0:
                handle = struct.unpack_from("<H", data, 4)[0] & 0x0FFF
                counts[index] += 1
                links[(index, handle)] = counts[index]
                started[(index, counts[index])] = when
            continue
        if op not in (OP_ACL_TX, OP_ACL_RX) or len(data) < 4:
            continue
        direction = "tx" if op == OP_ACL_TX else "rx"
        word, length = struct.unpack_from("<HH", data, 0)
        handle, boundary = word & 0x0FFF, (word >> 12) & 0x3
        body = data[4 : 4 + length]
        key = (index, direction, handle)
        if boundary in (0, 2):  # the first fragment of an L2CAP frame
            if len(body) < 4:
                continue
            partial[key] = [struct.unpack_from("<H", body, 0)[0] + 4, bytearray(body)]
        elif key in partial:
            partial[key][1] += body
        else:
            continue
        expected, frame = partial[key]
        if len(frame) < expected:
            continue
        del partial[key]
        link = links.get((index, handle), 0)
        cid = struct.unpack_from("<H", frame, 2)[0]
        payload = bytes(frame[4:expected])
        if cid == LE_SIGNALING_CID and len(payload) >= 4:
            signal(payload, index, link, requests, labels)
        channel = channels[(index, link, direction, cid)]
        channel.frames += 1
        channel.bytes += len(payload)
        channel.first = when if channel.first is None else channel.first
        channel.last = when
        if cid == ATT_CID:
            channel.sdus += 1
            channel.notifications += bool(payload) and payload[0] in NOTIFICATIONS
        elif cid >= 0x40:
            if channel.remaining <= 0 and len(payload) >= 2:
                channel.sdus += 1
                channel.remaining = struct.unpack_from("<H", payload, 0)[0]
                sdu = payload[2:]
                channel.notifications += bool(sdu) and sdu[0] in NOTIFICATIONS
                channel.remaining -= len(sdu)
            else:
                channel.remaining -= len(payload)
    report(channels, labels, started)


def signal(payload, index, link, requests, labels):
    code, identifier, length = struct.unpack_from("<BBH", payload, 0)
    body = payload[4 : 4 + length]
    if code == 0x14 and len(body) >= 10:  # LE credit based connection request
        psm, scid, mtu, mps, credits = struct.unpack_from("<5H", body, 0)
        requests[(index, link, identifier)] = psm
        labels[(index, link, scid)] = f"PSM 0x{psm:02x} LE, MTU {mtu} MPS {mps} credits {credits}"
    elif code == 0x15 and len(body) >= 10:  # its response
        dcid, mtu, mps, credits, result = struct.unpack_from("<5H", body, 0)
        psm = requests.get((index, link, identifier))
        if result == 0 and psm is not None:
            labels[(index, link, dcid)] = (
                f"PSM 0x{psm:02x} LE, MTU {mtu} MPS {mps} credits {credits}")
    elif code == 0x17 and len(body) >= 8:  # enhanced credit based (ECRED) connection request
        psm, mtu, mps, credits = struct.unpack_from("<4H", body, 0)
        requests[(index, link, identifier)] = psm
        for (scid,) in struct.iter_unpack("<H", body[8 : 8 + (len(body) - 8) // 2 * 2]):
            labels[(index, link, scid)] = (
                f"PSM 0x{psm:02x} ECRED, MTU {mtu} MPS {mps} credits {credits}")
    elif code == 0x18 and len(body) >= 8:  # its response
        mtu, mps, credits, result = struct.unpack_from("<4H", body, 0)
        psm = requests.get((index, link, identifier))
        if psm is not None:
            for (dcid,) in struct.iter_unpack("<H", body[8 : 8 + (len(body) - 8) // 2 * 2]):
                if dcid:
                    labels[(index, link, dcid)] = (
                        f"PSM 0x{psm:02x} ECRED, MTU {mtu} MPS {mps} credits {credits}")


def report(channels, labels, started):
    by_link = collections.defaultdict(list)
    for (index, link, direction, cid), channel in channels.items():
        by_link[(index, link)].append((direction, cid, channel))
    for (index, link), rows in sorted(by_link.items()):
        data_rows = [r for r in rows if r[1] not in (LE_SIGNALING_CID,) and r[2].frames >= 10]
        if not data_rows:
            continue
        since = started.get((index, link))
        print(f"hci{index} link {link}" + (f" (connected at {since:.3f})" if since else ""))
        for direction, cid, channel in sorted(data_rows, key=lambda r: (r[0], r[1])):
            label = "ATT bearer" if cid == ATT_CID else labels.get((index, link, cid), "?")
            span = channel.last - channel.first
            print(f"  {direction} cid 0x{cid:04x} {label}: {channel.frames} frames, "
                  f"{channel.bytes} bytes, {channel.sdus} SDUs, {channel.notifications} "
                  f"notifications, {channel.first:.3f}-{channel.last:.3f} ({span:.2f} s)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
