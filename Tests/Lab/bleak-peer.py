#!/usr/bin/python3
# bleak as an outside central and scanner (what Linux Python users pick), run inside the lab
# against `blekit advertise --message M` on another adapter or host.
#
#   PYTHONPATH=.build-lab/pylib Tests/Lab/bleak-peer.py central --adapter hci0 --expect FILE
#                                                       [--trials N] [--timeout S]
#   PYTHONPATH=.build-lab/pylib Tests/Lab/bleak-peer.py scan --adapter hci0 [--timeout S]
#
# central: scans (BleakScanner, service filter) until the transfer service's advertiser shows
# up, then N times: BleakClient(device).connect() (one try, bleak's defaults), start_notify on
# the plain characteristic, collect values until the literal EOM, stop_notify, disconnect.
# Prints one line per trial: "trial I first-connect ok|failed (ERROR) exact yes|no BYTES",
# then "first-connect K/N exact E/N". Exit 0 if every trial connected on its first try and was
# exact, 1 otherwise, 3 if the advertiser was never found.
# scan: prints "found ADDRESS" once BleakScanner sees the transfer service (exit 0), or exit 3.
# When LAB_SHARED / --ready FILE is given, the file is created once the scan is running, so a
# script can start the advertiser only then (the btvirt air reports an advertiser only when
# advertising switches on; docs/lab.md).
import argparse
import asyncio
import sys
import time

from bleak import BleakClient, BleakScanner

SERVICE = "e20a39f4-73f5-4bc4-a12f-17d1ad07a961"
PLAIN = "08590f7e-db05-467e-8757-72f6faeb13d4"


def say(text):
    print(text, flush=True)


async def find(adapter, timeout, ready):
    found = asyncio.get_running_loop().create_future()

    def seen(device, adv):
        if SERVICE in [u.lower() for u in adv.service_uuids] and not found.done():
            found.set_result(device)

    scanner = BleakScanner(seen, service_uuids=[SERVICE], bluez={"adapter": adapter})
    await scanner.start()
    if ready:
        open(ready, "w").close()
    try:
        return await asyncio.wait_for(found, timeout)
    except asyncio.TimeoutError:
        return None
    finally:
        await scanner.stop()


async def one_trial(device, adapter, timeout):
    values = []
    done = asyncio.Event()

    def on_value(_, data):
        values.append(bytes(data))
        if data == b"EOM":
            done.set()

    client = BleakClient(device, timeout=timeout, bluez={"adapter": adapter})
    try:
        await client.connect()
    except Exception as error:  # noqa: BLE001 - the failure is the result
        return False, None, f"{type(error).__name__}: {error}"
    try:
        await client.start_notify(PLAIN, on_value)
        await asyncio.wait_for(done.wait(), timeout)
        await client.stop_notify(PLAIN)
    except Exception as error:  # noqa: BLE001
        return True, None, f"{type(error).__name__}: {error}"
    finally:
        try:
            await client.disconnect()
        except Exception:  # noqa: BLE001
            pass
    return True, b"".join(values[:-1]), ""


async def central(args):
    device = await find(args.adapter, args.timeout, args.ready)
    if device is None:
        say("bleak: no advertiser of the transfer service found")
        return 3
    say(f"bleak: found {device.address}")
    expected = open(args.expect, "rb").read() if args.expect else None
    first = exact = 0
    for i in range(1, args.trials + 1):
        start = time.monotonic()
        connected, message, error = await one_trial(device, args.adapter, args.timeout)
        first += connected
        ok = message is not None and (expected is None or message == expected)
        exact += ok
        length = -1 if message is None else len(message)
        say(f"trial {i} first-connect {'ok' if connected else 'failed'}"
            f"{' (' + error + ')' if error else ''} exact {'yes' if ok else 'no'} {length} bytes"
            f" {time.monotonic() - start:.1f} s")
        await asyncio.sleep(args.pause)
    say(f"first-connect {first}/{args.trials} exact {exact}/{args.trials}")
    return 0 if first == exact == args.trials else 1


async def scan(args):
    device = await find(args.adapter, args.timeout, args.ready)
    if device is None:
        say("bleak: no advertiser of the transfer service found")
        return 3
    say(f"found {device.address}")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["central", "scan"])
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--expect")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--pause", type=float, default=0.5)
    parser.add_argument("--ready", help="create this file once the scan is running")
    args = parser.parse_args()
    sys.exit(asyncio.run(central(args) if args.mode == "central" else scan(args)))


if __name__ == "__main__":
    main()
