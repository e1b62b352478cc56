#!/usr/bin/python3
# bleak (an independent central) against `blekit serve profiles/heart-rate.json` on another
# host:
#
#   PYTHONPATH=.build-lab/pylib Tests/Lab/serve-bleak.py heart-rate --adapter hci0 \
#       --ready FILE [--timeout S]
#
# Scans for the profile's service (FILE is created once the scan runs, so the other host can
# start serving only then: the emulated air reports an advertiser when its advertising switches
# on), connects, reads 2a38 and 2a29, subscribes to 2a37 until 3 values came, writes 01 to 2a39
# (with response).
# Prints one "name value" line per result (values in hex), then "done"; exit 0 if all went, 1 on
# an error (printed), 3 if the advertiser was never found.
import argparse
import asyncio
import sys

from bleak import BleakClient, BleakScanner

SERVICES = {"heart-rate": "0000180d-0000-1000-8000-00805f9b34fb"}


def uuid16(short):
    return f"0000{short}-0000-1000-8000-00805f9b34fb"


def say(text):
    print(text, flush=True)


async def find(service, adapter, timeout, ready):
    found = asyncio.get_running_loop().create_future()

    def seen(device, adv):
        if service in [u.lower() for u in adv.service_uuids] and not found.done():
            found.set_result(device)

    scanner = BleakScanner(seen, service_uuids=[service], bluez={"adapter": adapter})
    await scanner.start()
    if ready:
        open(ready, "w").close()
    try:
        return await asyncio.wait_for(found, timeout)
    except asyncio.TimeoutError:
        return None
    finally:
        await scanner.stop()


async def collect(client, short, count, timeout):
    values = []
    enough = asyncio.Event()

    def on_value(_, data):
        values.append(bytes(data))
        if len(values) >= count:
            enough.set()

    await client.start_notify(uuid16(short), on_value)
    await asyncio.wait_for(enough.wait(), timeout)
    await client.stop_notify(uuid16(short))
    return values


async def run(args):
    device = await find(SERVICES[args.profile], args.adapter, args.timeout, args.ready)
    if device is None:
        say("bleak: no advertiser found")
        return 3
    say(f"found {device.address}")
    client = BleakClient(device, timeout=args.timeout, bluez={"adapter": args.adapter})
    try:
        await client.connect()
        say(f"read-2a38 {(await client.read_gatt_char(uuid16('2a38'))).hex()}")
        say(f"read-2a29 {(await client.read_gatt_char(uuid16('2a29'))).hex()}")
        values = await collect(client, "2a37", 3, args.timeout)
        say("notified-2a37 " + " ".join(v.hex() for v in values))
        await client.write_gatt_char(uuid16("2a39"), b"\x01", response=True)
        say("wrote-2a39 01")
    except Exception as error:  # noqa: BLE001 - the failure is the result
        say(f"error {type(error).__name__}: {error}")
        return 1
    finally:
        try:
            await client.disconnect()
        except Exception:  # noqa: BLE001
            pass
    say("done")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", choices=sorted(SERVICES))
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--ready", help="create this file once the scan is running")
    args = parser.parse_args()
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
