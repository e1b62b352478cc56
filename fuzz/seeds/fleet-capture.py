#!/usr/bin/env python3
"""Seeds for the fleet-json fuzz target from real gateway traffic: the built `blekit scan
--mqtt` (blekit and Theengs layouts) and `blekit monitor --mqtt --home-assistant` read a small
flood from bench/scan's stand-in bluetoothd on a private bus and publish to a real mosquitto;
mosquitto_sub's messages are written one file per distinct shape into the corpus directory.

    fuzz/seeds/fleet-capture.py --blekit .build/debug/blekit --into fuzz/corpus/fleet-json

Each seed file is `TOPIC\\x00PAYLOAD` (the target splits at the first NUL)."""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "scan"))
sys.path.insert(0, os.path.join(ROOT, "bench", "fleet"))
import scan  # noqa: E402
import fleet  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blekit", required=True)
    parser.add_argument("--into", required=True)
    parser.add_argument("--per-kind", type=int, default=3)
    parser.add_argument("--pylib", default="", help="where dbus_fast is (scripts/lab setup)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="fleet-capture.")
    args.work = work
    flood = scan.flood(20, 40)
    messages = []
    runs = [
        ["scan", "-a", "hci0", "--mqtt", "URL", "--gateway", "cap-scan", "--mqtt-interval", "0"],
        ["scan", "-a", "hci0", "--mqtt", "URL", "--gateway", "cap-theengs", "--mqtt-layout",
         "theengs", "--mqtt-interval", "0"],
        ["monitor", "-a", "hci0", "--mqtt", "URL", "--gateway", "cap-monitor", "--home-assistant",
         "--mqtt-interval", "0", "--mqtt-summary", "1"],
    ]
    for argv in runs:
        run = scan.Run(args, flood)
        broker = fleet.Broker(run.dir)
        try:
            url = "mqtt://127.0.0.1:%d" % broker.port
            process = subprocess.Popen([args.blekit] + [url if a == "URL" else a for a in argv],
                                       env=run.env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            time.sleep(6)
            process.send_signal(2)
            process.wait(timeout=20)
            time.sleep(1)
        finally:
            broker.close()
            run.close()
        with open(broker.messages, "rb") as f:
            for line in f:
                topic, _, payload = line.rstrip(b"\n").partition(b" ")
                messages.append((topic, payload))
    os.makedirs(args.into, exist_ok=True)
    kinds = {}
    for topic, payload in messages:
        parts = topic.split(b"/")
        level = 1 if parts[0] == b"homeassistant" else 2
        kind = b"/".join(parts[:1] + parts[level:level + 1]) if len(parts) > 2 else topic
        if kinds.get(kind, 0) >= args.per_kind:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
        data = topic + b"\x00" + payload
        name = "real-" + kind.decode(errors="replace").replace("/", "-") + "-" + \
            hashlib.sha1(data).hexdigest()[:8]
        with open(os.path.join(args.into, name), "wb") as out:
            out.write(data)
    print("fleet-capture: %d messages, %d seeds by kind %s" % (
        len(messages), sum(kinds.values()), sorted(k.decode() for k in kinds)))


if __name__ == "__main__":
    main()
