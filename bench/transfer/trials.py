#!/usr/bin/python3
# Inside the lab (scripts/bench-transfer runs it): one 256 KiB message from `blekit advertise`
# to each central, TRIALS times each, rotating which goes first. Prints one line per trial and
# a summary table. The centrals (--centrals, default blekit,l2cap,bleak):
#   blekit         `blekit receive --json` (the sequenced characteristic, AcquireNotify)
#   l2cap          the same message over an L2CAP channel (`advertise --l2cap`, `receive --l2cap`)
#   bleak          bench/transfer/bleak_central.py (the plain characteristic, StartNotify)
#   bleak-acquire  the same with AcquireNotify
#
#   trials.py --blekit PATH --pylib DIR [--trials N] [--size BYTES] [--out DIR]
#             [--centrals LIST] [--role single|central|peripheral]
#
# --role single (default): one host, the centrals on hci0, the peripheral on hci1. In a
# two-host lab, --role central on one host (hci0) and --role peripheral on the other (its hci0;
# scripts/bench-transfer puts the peripheral on host a):
# each side has its own bluetoothd, so bleak cannot meet the one-host race between its connect
# and bluetoothd's own GATT client (docs/lab.md). The hosts take turns through files in
# $LAB_SHARED: the central's host writes go-NNNN (the central's name) once its central is
# scanning, the peripheral's starts `advertise --once` for it and writes done-NNNN with
# advertise's status when it has exited.
#
# Per trial: remove every device object on the central's adapter (a fresh start for either
# central), start the central, wait until the adapter is discovering, then start `blekit
# advertise --file MSG --once` (the emulator reports an advertisement reliably only to a scan
# already running; docs/lab.md), wait for the central to finish and take its CPU (user+sys,
# the whole process: start, discovery, connect, transfer, exit) from wait4's rusage.
# Throughput is each central's own figure over the same span: from the subscription call's
# return to the last byte; transfer CPU is each central's own CPU over that span (blekit's
# `cpuSeconds` also covers its reply and unsubscribing, which bleak's does not).
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


def advertise_argv(args, adapter, central, message_path):
    return [args.blekit, "advertise", "-a", adapter, "--file", message_path, "--once",
            "--timeout", "180"] + (["--l2cap"] if central == "l2cap" else [])


def stop(proc, grace):
    """Waits up to grace seconds for proc, then terminates it (and kills it 10 s later)."""
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


class LocalPeripheral:
    """The one-host peripheral: `blekit advertise` on hci1, beside the central."""

    def __init__(self, args, bus):
        self.args, self.bus, self.adv = args, bus, None

    def ready(self):
        wait_for(lambda: self.bus.active_instances("hci1") == 0, 10)

    def start(self, tag, central, message_path):
        self.adv = subprocess.Popen(
            advertise_argv(self.args, "hci1", central, message_path),
            stdout=open(f"{self.args.out}/{tag}.adv.out", "wb"),
            stderr=open(f"{self.args.out}/{tag}.adv.err", "wb"))

    def finish(self, tag):
        if self.adv is not None:
            stop(self.adv, 15)
            self.adv = None

    def end(self):
        pass


class RemotePeripheral:
    """The two-host peripheral: the other host's trials.py --role peripheral, told through
    $LAB_SHARED."""

    def __init__(self, shared):
        self.shared, self.number = shared, 0

    def ready(self):
        pass

    def start(self, tag, central, message_path):
        self.number += 1
        with open(f"{self.shared}/go-{self.number:04d}.part", "w") as f:
            f.write(central)
        os.rename(f"{self.shared}/go-{self.number:04d}.part", f"{self.shared}/go-{self.number:04d}")

    def finish(self, tag):
        done = f"{self.shared}/done-{self.number:04d}"
        if not wait_for(lambda: os.path.exists(done), 40, step=0.1):
            log(f"{tag}: the peripheral host's advertise did not finish within 40 s of the central")
            return
        status = open(done).read().strip()
        if status != "0":
            log(f"{tag}: the peripheral host's advertise exited {status}")

    def end(self):
        open(f"{self.shared}/end", "w").close()


def serve_trials(args, message_path):
    """The peripheral's host: one `advertise --once` on hci0 per go-NNNN file, until the
    central's host writes end."""
    shared = os.environ.get("LAB_SHARED", "/tmp")
    number = 0
    while True:
        number += 1
        go = f"{shared}/go-{number:04d}"
        if not wait_for(lambda: os.path.exists(go) or os.path.exists(f"{shared}/end"), 900,
                        step=0.05):
            log("peripheral: the central's host sent nothing for 15 minutes")
            return 1
        if not os.path.exists(go):
            return 0
        central = open(go).read().strip()
        tag = f"{number:04d}-{central}"
        adv = subprocess.Popen(
            advertise_argv(args, "hci0", central, message_path),
            stdout=open(f"{args.out}/{tag}.adv.out", "wb"),
            stderr=open(f"{args.out}/{tag}.adv.err", "wb"))
        status = stop(adv, 200)
        with open(f"{shared}/done-{number:04d}.part", "w") as f:
            f.write(str(status))
        os.rename(f"{shared}/done-{number:04d}.part", f"{shared}/done-{number:04d}")


def trial(args, bus, peripheral, central, index, message_path, expected):
    tag = f"{central}-{index}"
    bus.remove_devices("hci0")
    peripheral.ready()
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
        if central == "bleak-acquire":
            argv.append("--acquire")
    # The lab's reliable order (docs/lab.md): the central's scan first, then the advertisement.
    started, proc = start_child(argv, env, f"{args.out}/{tag}.out", f"{args.out}/{tag}.err")
    if not wait_for(lambda: bus.discovering("hci0") or exited(proc), 90):
        log(f"{tag}: hci0 never started discovering")
    peripheral.start(tag, central, message_path)
    status, wall, cpu = finish_child(started, proc, 150)
    peripheral.finish(tag)
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
                   method=record.get("method"), cpu_transfer=record.get("cpuSeconds"))
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


def summarize(rows, size, channels, centrals, hosts):
    log("")
    # The stock default differs by generation: 3 (EATT) up to BlueZ 5.66, 1 since 5.67.
    stock = ("stock (1: BlueZ 5.82, no EATT)" if os.environ.get("LAB_DEBIAN") == "13"
             else "stock (3, EATT: BlueZ 5.66)")
    log(f"transfer of {size} bytes, bluetoothd Channels = {channels or stock}, "
        f"{hosts}")
    log(f"{'central':13} {'ok':>5} {'median B/s':>11} {'best B/s':>10} {'CPU s/MB':>9} "
        f"{'span CPU s/MB':>13} {'exact':>6} {'reordered':>10}")
    medians = {}
    for central in centrals:
        mine = [r for r in rows if r["central"] == central]
        good = [r for r in mine if r["status"] == 0 and r.get("bps")]
        if not good:
            log(f"{central:13} {0:>2}/{len(mine):<2} (no completed trial)")
            continue
        bps = [float(r["bps"]) for r in good]
        cpu_mb = statistics.median(r["cpu"] / (r["bytes"] / 1e6) for r in good if r["bytes"])
        span = [r["cpu_transfer"] / (r["bytes"] / 1e6) for r in good
                if r["bytes"] and r.get("cpu_transfer") is not None]
        span_text = f"{statistics.median(span):.3f}" if span else "-"
        exact = sum(1 for r in mine if r["exact"])
        reordered = [r.get("reordered") or 0 for r in good]
        medians[central] = statistics.median(bps)
        log(f"{central:13} {len(good):>2}/{len(mine):<2} {statistics.median(bps):>11.0f} "
            f"{max(bps):>10.0f} {cpu_mb:>9.3f} {span_text:>13} {exact:>3}/{len(mine):<2} "
            f"{'max ' + str(max(reordered)):>10}")
    for peer in ("bleak", "bleak-acquire"):
        if "blekit" in medians and peer in medians:
            ratio = medians["blekit"] / medians[peer]
            log(f"blekit/{peer} median throughput: {ratio:.2f}x (target >= 1.5x: "
                f"{'met' if ratio >= 1.5 else 'NOT met'})")
    if "blekit" in medians and "l2cap" in medians:
        ratio = medians["l2cap"] / medians["blekit"]
        log(f"L2CAP/GATT (blekit) median throughput: {ratio:.2f}x (target >= 2x: "
            f"{'met' if ratio >= 2 else 'NOT met'})")
    log("Medians and CPU are over completed trials; exact counts every trial.")
    log("l2cap: the same message over an L2CAP channel (advertise --l2cap, receive --l2cap),")
    log("from the channel's opening to the verified end.")
    log("CPU s/MB: user+sys CPU of the whole central process (start to exit) per MB received;")
    log("span CPU s/MB: the central's own CPU from its subscription to the last byte. Medians")
    log("over trials. reordered: blekit = sequenced frames put back in place; bleak = plain")
    log("values not at their place in the message (plain framing cannot repair them).")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blekit", required=True)
    parser.add_argument("--pylib", required=True)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--size", type=int, default=256 * 1024)
    parser.add_argument("--out", default=os.environ.get("LAB_RESULTS", "/tmp") + "/bench-transfer")
    parser.add_argument("--centrals", default="blekit,l2cap,bleak")
    parser.add_argument("--role", choices=("single", "central", "peripheral"), default="single")
    args = parser.parse_args()
    centrals = tuple(args.centrals.split(","))
    unknown = set(centrals) - {"blekit", "l2cap", "bleak", "bleak-acquire"}
    if unknown or not centrals:
        print(f"trials.py: unknown central(s) {sorted(unknown)}", file=sys.stderr)
        sys.exit(2)
    os.makedirs(args.out, exist_ok=True)
    # Printable text that differs everywhere, so a misplaced chunk shows. Both hosts of a
    # two-host run make the same text.
    text = " ".join(str(i) for i in range(1, 200000)).encode()[:args.size]
    message_path = f"{args.out}/message.txt"
    with open(message_path, "wb") as f:
        f.write(text)
    if args.role == "peripheral":
        sys.exit(serve_trials(args, message_path))
    bus = Bus()
    if args.role == "central":
        peripheral = RemotePeripheral(os.environ.get("LAB_SHARED", "/tmp"))
    else:
        peripheral = LocalPeripheral(args, bus)
    rows = []
    channels = os.environ.get("LAB_CHANNELS", "")
    try:
        for index in range(args.trials):
            shift = index % len(centrals)
            for central in centrals[shift:] + centrals[:shift]:
                rows.append(trial(args, bus, peripheral, central, index, message_path, text))
    finally:
        peripheral.end()
    with open(f"{args.out}/rows-channels{channels or 'stock'}.json", "w") as f:
        json.dump(rows, f, indent=1)
    hosts = "two hosts" if args.role == "central" else "one host"
    summarize(rows, args.size, channels, centrals, hosts)


if __name__ == "__main__":
    main()
