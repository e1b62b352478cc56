"""Instructions per received KiB of a notification stream, natively: each central receives the
transfer service's message from fake_peer.py (a stand-in bluetoothd on a private bus) under
valgrind's callgrind, once with a SMALL message and once with a LARGE one; the difference of
the instruction totals over the difference in KiB is the cost of receiving, with start-up,
scanning, connecting and the GATT walk cancelled out. Every process a central starts is
counted (--trace-children). The centrals:
  floor          bench/receive/floor.c: Connect, AcquireNotify, read until EOM, write the bytes
  blekit         `blekit receive --accept-unordered` (AcquireNotify; the fake offers no EATT
                 facts, so the plain order is unknown)
  bleak-acquire  bench/transfer/bleak_central.py --acquire (bleak's AcquireNotify)
  bleak          bench/transfer/bleak_central.py (bleak's default, StartNotify: one
                 PropertiesChanged signal per value)
Each central's output is checked against the message. The same runs without valgrind give the
CPU time (user + system of the central's processes) per KiB, for comparison only: it moves
with the machine's load.

By default the stand-in writes as fast as the central reads (at most ~31 values unread), so a
central that wakes up finds several values waiting. --interval MS sends one value every MS
milliseconds instead: each value then reaches the central alone, as on a slow radio link (a
few values per connection event), and every value pays the central's whole wake-up path.
Pick MS well above a value's cost under valgrind (bleak: ~100,000 instructions, a few ms
under callgrind) and sizes small enough for the time it takes.

Usage: receive.py --blekit PATH --floor PATH --shim PATH --pylib DIR --work DIR
                  [--small BYTES] [--large BYTES] [--centrals a,b,...] [--interval MS]
                  [--where]   (then blekit's instructions per value by layer, beside the floor's)"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEVICE = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
CHARACTERISTIC = DEVICE + "/service0010/char0011"
BUS_CONFIG = """<busconfig><type>system</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/><allow own="*"/></policy></busconfig>"""


def centrals(args):
    bleak = [sys.executable, os.path.join(ROOT, "bench/transfer/bleak_central.py"),
             "--timeout", "300"]
    return {
        "floor": [args.floor, DEVICE, CHARACTERISTIC],
        "blekit": [args.blekit, "receive", "--accept-unordered", "--timeout", "300"],
        "bleak-acquire": bleak + ["--acquire"],
        "bleak": bleak,
    }


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        os.makedirs(self.work, exist_ok=True)
        config = os.path.join(self.work, "bus.conf")
        with open(config, "w") as out:
            out.write(BUS_CONFIG % os.path.join(self.work, "bus"))
        self.daemon = subprocess.Popen(
            ["dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.daemon.stdout.readline().strip()
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address,
                        PYTHONPATH=args.pylib, PYTHONHASHSEED="0")
        self.fake = None

    def start_fake(self, size):
        self.stop_fake()
        self.expected = os.path.join(self.work, "message-%d" % size)
        env = dict(self.env, MESSAGE_BYTES=str(size), MESSAGE_OUT=self.expected,
                   INTERVAL_MS=str(self.args.interval))
        self.fake = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_peer.py")],
                                     env=env, stdout=subprocess.PIPE, text=True,
                                     stderr=open(os.path.join(self.work, "fake.log"), "a"))
        if self.fake.stdout.readline().strip() != "ready":
            sys.exit("receive.py: the fake bluetoothd did not start (see fake.log)")

    def stop_fake(self):
        if self.fake:
            self.fake.kill()
            self.fake.wait()
            self.fake = None

    def check(self, name, output):
        message = open(self.expected, "rb").read()
        if name.startswith("bleak"):
            result = json.loads(output.decode().strip().splitlines()[-1])
            ok = result.get("bytes") == len(message)
        else:
            ok = output == message
        if not ok:
            sys.exit("receive.py: %s did not receive the %d-byte message (got %r...)"
                     % (name, len(message), output[:200]))

    def native(self, name, argv):
        """CPU seconds (user + system) of one run without valgrind, children included."""
        start = time.monotonic()
        process = subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        output, errors = process.communicate(timeout=600)
        if process.returncode != 0:
            sys.exit("receive.py: %s exited %d: %s" % (name, process.returncode,
                                                       errors.decode()[-2000:]))
        self.check(name, output)
        return time.monotonic() - start

    def cpu(self, name, argv):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = self.native(name, argv)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall

    def instructions(self, name, argv, label):
        prefix = os.path.join(self.work, "cg.%s." % label)
        for old in os.listdir(self.work):
            if old.startswith("cg.%s." % label):
                os.remove(os.path.join(self.work, old))
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes",
                   "--callgrind-out-file=" + prefix + "%p", *argv]
        env = dict(self.env, LD_PRELOAD=self.args.shim) if name == "blekit" else self.env
        log = os.path.join(self.work, "valgrind.%s.log" % label)
        with open(log, "w") as errors:
            process = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=errors,
                                     timeout=1800)
        if process.returncode != 0:
            sys.exit("receive.py: %s under valgrind exited %d (see %s)"
                     % (name, process.returncode, log))
        self.check(name, process.stdout)
        total = 0
        for file in os.listdir(self.work):
            if file.startswith("cg.%s." % label):
                with open(os.path.join(self.work, file)) as lines:
                    for line in lines:
                        if line.startswith(("summary:", "totals:")):
                            total += int(line.split()[1])
                            break
        return total


def main():
    parser = argparse.ArgumentParser()
    for option in ("--blekit", "--floor", "--shim", "--pylib", "--work"):
        parser.add_argument(option, required=True)
    parser.add_argument("--small", type=int, default=64 << 10)
    parser.add_argument("--large", type=int, default=1 << 20)
    parser.add_argument("--centrals", default="floor,blekit,bleak-acquire,bleak")
    parser.add_argument("--interval", type=float, default=0,
                        help="milliseconds between values (default 0: as fast as read)")
    parser.add_argument("--where", action="store_true",
                        help="then where blekit's instructions per value go, layer by layer,"
                             " beside the floor's (bench/where.py)")
    args = parser.parse_args()
    names = args.centrals.split(",")
    commands = centrals(args)
    bench = Bench(args)
    results = {name: {} for name in names}
    try:
        for size in (args.small, args.large):
            bench.start_fake(size)
            for name in names:
                print("receive.py: %s, %d bytes..." % (name, size), file=sys.stderr, flush=True)
                cpu, wall = bench.cpu(name, commands[name])
                count = bench.instructions(name, commands[name], "%s-%d" % (name, size))
                results[name][size] = (count, cpu, wall)
    finally:
        bench.stop_fake()
        bench.daemon.kill()
    kib = (args.large - args.small) / 1024
    per = {name: (results[name][args.large][0] - results[name][args.small][0]) / kib
           for name in names}
    cpu = {name: (results[name][args.large][1] - results[name][args.small][1]) / kib * 1e6
           for name in names}
    pace = ("one value every %g ms" % args.interval if args.interval
            else "values as fast as the central reads")
    print("instructions per received KiB (callgrind: %d-byte message minus %d-byte message,"
          " 244-byte values, %s)" % (args.large, args.small, pace))
    print("%-14s %14s %14s %14s %14s %12s %12s" % ("central", "instr/KiB", "x floor",
                                                  "x bleak-acq", "x bleak", "CPU us/KiB",
                                                  "instr/value"))
    for name in names:
        def ratio(other):
            return "%.3fx" % (per[name] / per[other]) if other in per and per[other] else "-"
        print("%-14s %14.0f %14s %14s %14s %12.1f %12.0f" % (
            name, per[name], ratio("floor"), ratio("bleak-acquire"), ratio("bleak"), cpu[name],
            per[name] * 244 / 1024))
    print("totals (instructions, native CPU s, native wall s) per message size:")
    for name in names:
        print("  %-14s %s" % (name, "  ".join(
            "%d B: %d / %.3f / %.2f" % (size, *results[name][size])
            for size in (args.small, args.large))))
    if args.where and "blekit" in names:
        def files(name, size):
            prefix = "cg.%s-%d." % (name, size)
            return ",".join(os.path.join(args.work, f) for f in sorted(os.listdir(args.work))
                            if f.startswith(prefix))
        values = (args.large - args.small) / 244
        where = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "where.py"),
                 "--units", str(values), "--label", "blekit",
                 "--small", files("blekit", args.small), "--large", files("blekit", args.large)]
        if "floor" in names:
            where += ["--vs-label", "C floor", "--vs-small", files("floor", args.small),
                      "--vs-large", files("floor", args.large)]
        print()
        print("per 244-byte value (bench/where.py):", flush=True)
        subprocess.run(where, check=True)


if __name__ == "__main__":
    main()
