#!/usr/bin/env python3
"""Writes the l2cap-framing fuzz target's seeds to fuzz/corpus/l2cap-framing/.

The SDUs are the ones blekit's L2CAP sender puts on a channel (L2CAPMessageTransfer: a 13-byte
header "BLKL", version, length and CRC-32 little-endian, then the message in SDUs of the send
MTU; the receiver's "WIN" confirmations and "ACK" answer), for messages like those the lab's
l2cap suite sends, written in the target's input format:
  mode 0 (even): [mode][limit][len][SDU]...   the first SDU is the header
  mode 1 (odd):  [1][SDU size - 1][length lo][length hi][message][byte to change]
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "l2cap-framing")


def header(message, version=2, length=None, crc=None):
    return b"BLKL" + bytes([version]) + struct.pack(
        "<II", len(message) if length is None else length,
        zlib.crc32(message) if crc is None else crc)


def sdus(first, pieces):
    out = bytes([len(first)]) + first
    for piece in pieces:
        out += bytes([len(piece)]) + piece
    return out


def arbitrary(shift, limit, first, pieces):
    return bytes([shift << 1, limit]) + sdus(first, pieces)


def main():
    os.makedirs(OUT, exist_ok=True)
    hello = b"hello over L2CAP from hci1"
    seeds = {
        # A short message in one SDU, as advertise --l2cap -m sends it (limit 255 << 1).
        "short-message": arbitrary(1, 255, header(hello), [hello]),
        # The same split in 7-byte SDUs, and a version 1 header.
        "split-sdus": arbitrary(1, 255, header(hello), [hello[i:i + 7] for i in range(0, 26, 7)]),
        "version-1": arbitrary(1, 255, header(hello, version=1), [hello]),
        # A lying header: 16 MiB announced (limit 255 << 17), a few bytes sent.
        "lying-header": arbitrary(17, 255, header(b"", length=16 << 20, crc=0), [b"abc"]),
        # A wrong CRC, more bytes than announced, an empty SDU, the answers.
        "bad-crc": arbitrary(1, 255, header(hello, crc=0x12345678), [hello]),
        "trailing": arbitrary(1, 255, header(hello[:10]), [hello]),
        "empty-sdu": arbitrary(1, 255, header(hello), [b"", hello]),
        "window": arbitrary(0, 0, b"WIN" + struct.pack("<I", 8192), [b"ACK" + struct.pack("<I", zlib.crc32(hello))]),
        # Framed messages: 26 bytes in 23-byte SDUs (the smallest LE MTU), 600 bytes in 200.
        "framed-small": bytes([1, 22, 26, 0]) + hello + bytes([3]),
        "framed-600": bytes([1, 199, 0x58, 0x02]) + bytes((i * 131) & 0xFF for i in range(600)) + bytes([77]),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
