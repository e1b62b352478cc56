#!/usr/bin/python3
# Inside the lab (scripts/bench-transfer runs it): one 256 KiB message from `blekit advertise`
# on hci1 to (a) `blekit receive` and (b) bench/transfer/bleak_central.py on hci0, and (c) the
# same message over an L2CAP channel (`advertise --l2cap` to `receive --l2cap`), TRIALS times
# each, rotating which goes first. Prints one line per trial and a summary table.
#
#   trials.py --blekit PATH --pylib DIR [--trials N] [--size BYTES] [--out DIR]
#
# Per trial: remove every device object on hci0 (a fresh start for either central), start the
# central, wait until hci0 is discovering, then start `blekit advertise -a hci1 --file MSG
# --once` (the emulator reports an advertisement reliably only to a scan already running;
# docs/lab.md), wait for the central to finish and take its CPU (user+sys, the whole process: start,
# discovery, connect, transfer, exit) from wait4's rusage. Throughput is each central's own
# figure over the same span: from the subscription call's return to the last byte.
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import dbus

BLUEZ = "org.bluez"
HERE = os.path.dirname(os.path.abspath(__file__))


def log(text):
    print(text, flush=True)


class Bus:
    def __init__(self):
        self.bus = dbus.SystemBus()

    def objects(self):
        om = dbus.Interface(self.bus.get_object(BLUEZ, "/"), "org.freedesktop.DBus.ObjectManager")
        return om.GetManagedObjects()

    def remove_devices(self, adapter):
        path = f"/org/bluez/{adapter}"
        iface = dbus.Interface(self.bus.get_object(BLUEZ, path), "org.bluez.Adapter1")
        for obj, ifaces in self.objects().items():
            dev = ifaces.get("org.bluez.Device1")
            if dev and str(dev.get("Adapter")) == path:
                try:
                    iface.RemoveDevice(obj)
                except dbus.DBusException:
                    pass

    def discovering(self, adapter):
        props = dbus.Interface(self.bus.get_object(BLUEZ, f"/org/bluez/{adapter}"),
                               "org.freedesktop.DBus.Properties")
        return bool(props.Get("org.bluez.Adapter1", "Discovering"))

    def active_instances(self, adapter):
        props = dbus.Interface(self.bus.get_object(BLUEZ, f"/org/bluez/{adapter}"),
                               "org.freedesktop.DBus.Properties")
        try:
            return int(props.Get("org.bluez.LEAdvertisingManager1", "ActiveInstances"))
        except dbus.DBusException:
            return 0


def wait_for(predicate, seconds, step=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def start_child(argv, env, stdout_path, stderr_path):
    out, err = open(stdout_path, "wb"), open(stderr_path, "wb")
    return time.monotonic(), subprocess.Popen(argv, env=env, stdout=out, stderr=err)


def exited(proc):
    """True once proc has exited, without reaping it (finish_child needs its rusage)."""
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def finish_child(started, proc, timeout):
    """Waits for proc; returns (status, wall seconds, CPU seconds of the process)."""
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.monotonic() - started, usage.ru_utime + usage.ru_stime


def trial(args, bus, central, index, message_path, expected):
    tag = f"{central}-{index}"
    bus.remove_devices("hci0")
    wait_for(lambda: bus.active_instances("hci1") == 0, 10)
    wait_for(lambda: not bus.discovering("hci0"), 10)
    env = dict(os.environ)
    if central == "blekit":
        argv = [args.blekit, "receive", "-a", "hci0", "--timeout", "60", "--json"]
    elif central == "l2cap":
        argv = [args.blekit, "receive", "--l2cap", "-a", "hci0", "--timeout", "60", "--json"]
    else:
        env["PYTHONPATH"] = args.pylib
        argv = [sys.executable, os.path.join(HERE, "bleak_central.py"), "--adapter", "hci0",
                "--expect", message_path, "--timeout", "60"]
        if args.bleak_acquire:
            argv.append("--acquire")
    # The lab's reliable order (docs/lab.md): the central's scan first, then the advertisement.
    started, proc = start_child(argv, env, f"{args.out}/{tag}.out", f"{args.out}/{tag}.err")
    if not wait_for(lambda: bus.discovering("hci0") or exited(proc), 90):
        log(f"{tag}: hci0 never started discovering")
    adv = subprocess.Popen(
        [args.blekit, "advertise", "-a", "hci1", "--file", message_path, "--once",
         "--timeout", "180"] + (["--l2cap"] if central == "l2cap" else []),
        stdout=open(f"{args.out}/{tag}.adv.out", "wb"),
        stderr=open(f"{args.out}/{tag}.adv.err", "wb"))
    status, wall, cpu = finish_child(started, proc, 150)
    try:
        adv.wait(timeout=15)
    except subprocess.TimeoutExpired:
        adv.terminate()
        try:
            adv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            adv.kill()
            adv.wait()
    row = {"central": central, "trial": index, "status": status, "wall": round(wall, 3),
           "cpu": round(cpu, 4)}
    text = open(f"{args.out}/{tag}.out", "rb").read()
    try:
        record = json.loads(text.decode().strip().splitlines()[-1]) if text.strip() else {}
    except (ValueError, IndexError):
        record = {}
    if central in ("blekit", "l2cap"):
        message = record.get("message", "").encode()
        row.update(bytes=len(message), seconds=record.get("seconds"),
                   bps=record.get("bytesPerSecond"), exact=message == expected,
                   reordered=record.get("framesOutOfOrder"), framing=record.get("framing"),
                   method=record.get("method"))
    else:
        row.update(bytes=record.get("bytes", 0), seconds=record.get("seconds"),
                   bps=record.get("bytes_per_second"), exact=record.get("exact", False),
                   reordered=record.get("out_of_place"), framing="plain",
                   method=record.get("method"), cpu_transfer=record.get("cpu_transfer"))
    if status != 0:
        row["exact"] = False
        row["error"] = open(f"{args.out}/{tag}.err", "rb").read().decode(errors="replace")[-300:]
    log(json.dumps(row))
    return row


def summarize(rows, size, channels):
    log("")
    log(f"256 KiB transfer, {size} bytes, bluetoothd Channels = {channels or 'stock (3, EATT)'}")
    log(f"{'central':8} {'ok':>5} {'median B/s':>11} {'best B/s':>10} {'CPU s/MB':>9} "
        f"{'exact':>6} {'reordered':>10}")
    medians = {}
    for central in ("blekit", "l2cap", "bleak"):
        mine = [r for r in rows if r["central"] == central]
        good = [r for r in mine if r["status"] == 0 and r.get("bps")]
        if not good:
            log(f"{central:8} {0:>2}/{len(mine):<2} (no completed trial)")
            continue
        bps = [float(r["bps"]) for r in good]
        cpu_mb = statistics.median(r["cpu"] / (r["bytes"] / 1e6) for r in good if r["bytes"])
        exact = sum(1 for r in mine if r["exact"])
        reordered = [r.get("reordered") or 0 for r in good]
        medians[central] = statistics.median(bps)
        log(f"{central:8} {len(good):>2}/{len(mine):<2} {statistics.median(bps):>11.0f} "
            f"{max(bps):>10.0f} {cpu_mb:>9.3f} {exact:>3}/{len(mine):<2} "
            f"{'max ' + str(max(reordered)):>10}")
    if "blekit" in medians and "bleak" in medians:
        ratio = medians["blekit"] / medians["bleak"]
        log(f"blekit/bleak median throughput: {ratio:.2f}x (target >= 1.5x: "
            f"{'met' if ratio >= 1.5 else 'NOT met'})")
    if "blekit" in medians and "l2cap" in medians:
        ratio = medians["l2cap"] / medians["blekit"]
        log(f"L2CAP/GATT (blekit) median throughput: {ratio:.2f}x (target >= 2x: "
            f"{'met' if ratio >= 2 else 'NOT met'})")
    log("l2cap: the same message over an L2CAP channel (advertise --l2cap, receive --l2cap),")
    log("from the channel's opening to the verified end.")
    log("CPU s/MB: user+sys CPU of the whole central process (start to exit) per MB received,")
    log("median over trials. reordered: blekit = sequenced frames put back in place; bleak =")
    log("plain values not at their place in the message (plain framing cannot repair them).")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blekit", required=True)
    parser.add_argument("--pylib", required=True)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--size", type=int, default=256 * 1024)
    parser.add_argument("--out", default=os.environ.get("LAB_RESULTS", "/tmp") + "/bench-transfer")
    parser.add_argument("--bleak-acquire", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Printable text that differs everywhere, so a misplaced chunk shows.
    text = " ".join(str(i) for i in range(1, 200000)).encode()[:args.size]
    message_path = f"{args.out}/message.txt"
    with open(message_path, "wb") as f:
        f.write(text)
    bus = Bus()
    rows = []
    channels = os.environ.get("LAB_CHANNELS", "")
    for index in range(args.trials):
        centrals = ("blekit", "l2cap", "bleak")
        order = centrals[index % 3:] + centrals[:index % 3]
        for central in order:
            rows.append(trial(args, bus, central, index, message_path, text))
    with open(f"{args.out}/rows-channels{channels or 'stock'}.json", "w") as f:
        json.dump(rows, f, indent=1)
    summarize(rows, args.size, channels)


if __name__ == "__main__":
    main()
