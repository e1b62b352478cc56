#!/usr/bin/python3
# The bleak side of scripts/bench-scan: a scanner written the way a bleak user would write it
# (BleakScanner with a detection callback, bleak's defaults), counting advertisements until the
# device named END (fake_flood.py's last) is seen. Prints one JSON object: reports (callbacks),
# devices (distinct addresses).
#   PYTHONPATH=.build-lab/pylib bleak_scan.py [--timeout S]
import argparse
import asyncio
import json
import sys

from bleak import BleakScanner


async def run(timeout):
    reports = 0
    addresses = set()
    done = asyncio.Event()

    def seen(device, advertisement):
        nonlocal reports
        reports += 1
        addresses.add(device.address)
        if advertisement.local_name == "END":
            done.set()

    async with BleakScanner(detection_callback=seen):
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except asyncio.TimeoutError:
            print("bleak_scan: END not seen after %d reports" % reports, file=sys.stderr)
            return 4, {"reports": reports, "devices": len(addresses)}
    return 0, {"reports": reports, "devices": len(addresses)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=3600)
    status, result = asyncio.run(run(parser.parse_args().timeout))
    print(json.dumps(result), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
