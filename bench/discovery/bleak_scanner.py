#!/usr/bin/python3
# The bleak scanner of scripts/bench-discovery: a BleakScanner (bleak from PyPI, its defaults)
# filtered on a service UUID, printing one line per advertisement it is told about, until
# SIGINT/SIGTERM or --timeout.
#
#   PYTHONPATH=.build-bench/pylib bleak_scanner.py [--adapter hci0] [--service UUID]
#                                                  [--timeout S]
import argparse
import asyncio
import signal
import sys

from bleak import BleakScanner

SERVICE = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"


async def run(args):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def seen(device, adv):
        sys.stdout.write(f"{device.address} {adv.local_name or ''} rssi={adv.rssi}\n")
        sys.stdout.flush()

    scanner = BleakScanner(seen, [args.service], bluez={"adapter": args.adapter})
    await scanner.start()
    try:
        await asyncio.wait_for(stop.wait(), args.timeout)
    except asyncio.TimeoutError:
        pass
    await scanner.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--service", default=SERVICE)
    parser.add_argument("--timeout", type=float, default=3600)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
