#!/usr/bin/python3
# The bleak side of scripts/bench-transfer: a central written the way a bleak user would write
# it (bleak from PyPI, its defaults), receiving the transfer sample's plain protocol: find a
# peripheral advertising the transfer service, connect, start_notify on the plain
# characteristic, collect values until the literal EOM, disconnect.
#
#   PYTHONPATH=.build-bench/pylib bleak_central.py [--adapter hci0] [--expect FILE]
#                                                  [--acquire] [--timeout S]
#
# Prints one JSON object on stdout:
#   bytes, values, seconds (start_notify returned -> EOM, the same span blekit receive reports),
#   first_to_last (first value -> EOM), bytes_per_second, cpu_transfer (this process's user+sys
#   CPU seconds over the same span), exact (bytes == FILE), out_of_place (values whose content
#   is not the FILE's slice at their position), method.
# Exit: 0 done, 3 not found, 4 cut before EOM, 1 other failure.
import argparse
import asyncio
import json
import os
import sys
import time

from bleak import BleakClient, BleakScanner

SERVICE = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
PLAIN = "08590f7e-db05-467e-8757-72f6faeb13d4"


def cpu():
    t = os.times()
    return t.user + t.system


async def find(adapter, timeout):
    # The emulator reports an advertiser only when scanning is switched on, so a scan that
    # started before the report can miss it: rescan in 2 s rounds (blekit's central restarts
    # every 1 s) until the deadline.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        device = await BleakScanner.find_device_by_filter(
            lambda d, ad: SERVICE in [u.lower() for u in ad.service_uuids],
            timeout=min(2.0, max(0.5, deadline - time.monotonic())),
            service_uuids=[SERVICE],
            bluez={"adapter": adapter},
        )
        if device is not None:
            return device
    return None


async def run(args):
    # In the lab, connecting sometimes ends with "failed to discover services, device
    # disconnected": find and connect again, up to 3 times, as a careful bleak user would.
    for attempt in range(1, 4):
        device = await find(args.adapter, args.timeout)
        if device is None:
            print("bleak_central: no peripheral advertising the transfer service",
                  file=sys.stderr)
            return 3, {}
        try:
            status, result = await receive(args, device)
        except Exception as error:
            print(f"bleak_central: attempt {attempt}: {error!r}", file=sys.stderr, flush=True)
            if attempt == 3:
                raise
            await asyncio.sleep(1)
            continue
        result["attempts"] = attempt
        return status, result


async def receive(args, device):
    values = []
    done = asyncio.Event()
    marks = {}

    def on_value(_, data):
        if not values:
            marks["first"] = time.monotonic()
        values.append(bytes(data))
        if data == b"EOM":
            marks["end"] = time.monotonic()
            marks["cpu_end"] = cpu()
            done.set()

    async with BleakClient(device, timeout=args.timeout, bluez={"adapter": args.adapter}) as client:
        notify_args = {"use_start_notify": False} if args.acquire else {}
        await client.start_notify(PLAIN, on_value, bluez=notify_args)
        start, cpu_start = time.monotonic(), cpu()
        try:
            await asyncio.wait_for(done.wait(), args.timeout)
        except asyncio.TimeoutError:
            print(f"bleak_central: cut after {len(values)} values", file=sys.stderr)
            return 4, {"bytes": sum(map(len, values)), "values": len(values)}
        try:
            await client.stop_notify(PLAIN)
        except Exception:  # the peer may already be going away (advertise --once)
            pass
    message = b"".join(values[:-1])
    seconds = marks["end"] - start
    result = {
        "bytes": len(message),
        "values": len(values) - 1,
        "seconds": round(seconds, 4),
        "first_to_last": round(marks["end"] - marks["first"], 4),
        "bytes_per_second": round(len(message) / max(seconds, 1e-6), 1),
        "cpu_transfer": round(marks["cpu_end"] - cpu_start, 4),
        "method": "acquire-notify" if args.acquire else "start-notify",
    }
    if args.expect:
        expected = open(args.expect, "rb").read()
        result["exact"] = message == expected
        misplaced = 0
        offset = 0
        for value in values[:-1]:
            if expected[offset:offset + len(value)] != value:
                misplaced += 1
            offset += len(value)
        result["out_of_place"] = misplaced
    return 0, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--expect")
    parser.add_argument("--acquire", action="store_true", help="AcquireNotify, not StartNotify")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    status, result = asyncio.run(run(args))
    print(json.dumps(result), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
