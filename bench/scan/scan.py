"""Scanning at scale, natively: each scanner reads fake_flood.py's advertisements (a stand-in
bluetoothd on a private bus: DEVICES distinct devices' InterfacesAdded, then CHANGES
PropertiesChanged with RSSI and ManufacturerData, then the devices vanish) until the last
device, END, shows in its output.

  instructions per report: callgrind (every process of the scanner), (count for the large
    flood - count for the small one) / (difference in advertisements), so start-up and the
    end (monitor's summary) cancel out;
  RSS: the scanner's peak resident set (getrusage, native run) after one generation of the
    large flood, after three (each generation's devices vanish before the next appears), and
    after three whose devices never vanish (KEEP=1, the control: what no forgetting costs).

The scanners:
  scan      `blekit scan --json` (one line per new device; every report is still read)
  monitor   `blekit monitor --json` (FolkBears IDs: one line per sighting)
  bleak     bench/scan/bleak_scan.py (BleakScanner, a detection callback per report)

Usage: scan.py --blekit PATH --shim PATH --pylib DIR --work DIR [--scanners a,b]
               [--small D,C] [--large D,C] [--rss D,C] [--no-rss] [--no-callgrind] [--where]
(defaults: callgrind between 1,000 + 10,000 and 2,000 + 20,000 advertisements, since a
Python scanner under callgrind reads about 300 reports a second; RSS after 10,000 devices +
100,000 changes per generation)"""
import argparse
import os
import resource
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUS_CONFIG = """<busconfig><type>system</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/><allow own="*"/></policy>
<limit name="max_incoming_bytes">1000000000</limit>
<limit name="max_outgoing_bytes">1000000000</limit></busconfig>"""


def scanners(args):
    return {
        "scan": ([args.blekit, "scan", "--json"], '"name":"END"'),
        "monitor": ([args.blekit, "monitor", "--json"], "ee" * 16),
        "bleak": ([sys.executable, os.path.join(HERE, "bleak_scan.py")], '"reports"'),
    }


class Run:
    """One scanner against one fresh bus and flood."""

    counter = 0

    def __init__(self, args, flood):
        Run.counter += 1
        self.dir = os.path.join(args.work, "run%d" % Run.counter)
        os.makedirs(self.dir)
        config = os.path.join(self.dir, "bus.conf")
        with open(config, "w") as out:
            out.write(BUS_CONFIG % os.path.join(self.dir, "bus"))
        self.daemon = subprocess.Popen(
            ["dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "daemon.log"), "w"),
            text=True)
        address = self.daemon.stdout.readline().strip()
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address, PYTHONPATH=args.pylib,
                        PYTHONHASHSEED="0")
        self.fake = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_flood.py")], env=dict(self.env, **flood),
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "fake.log"), "w"),
            text=True)
        if self.fake.stdout.readline().strip() != "ready":
            sys.exit("scan.py: the fake bluetoothd did not start (%s)" % self.dir)

    def close(self):
        for process in (self.fake, self.daemon):
            process.kill()
            process.wait()

    def scan(self, name, argv, marker, env=None):
        """Runs the scanner until its output shows END; returns (rusage, output lines)."""
        process = subprocess.Popen(argv, env=dict(self.env, **(env or {})),
                                   stdout=subprocess.PIPE,
                                   stderr=open(os.path.join(self.dir, "scanner.log"), "w"))
        lines = 0
        for line in process.stdout:
            lines += 1
            if marker.encode() in line:
                break
        else:
            sys.exit("scan.py: %s ended before END (%s)" % (name, self.dir))
        if not name.startswith("bleak"):
            process.send_signal(signal.SIGINT)
        for _ in process.stdout:
            lines += 1
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = status
        return usage, lines


def callgrind_total(directory, prefix):
    total = 0
    for file in os.listdir(directory):
        if file.startswith(prefix):
            with open(os.path.join(directory, file)) as lines:
                for line in lines:
                    if line.startswith(("summary:", "totals:")):
                        total += int(line.split()[1])
                        break
    return total


def flood(devices, changes, generations=1, keep=False):
    return {"DEVICES": str(devices), "CHANGES": str(changes),
            "GENERATIONS": str(generations), "KEEP": "1" if keep else "0"}


def main():
    parser = argparse.ArgumentParser()
    for option in ("--blekit", "--shim", "--pylib", "--work"):
        parser.add_argument(option, required=True)
    parser.add_argument("--scanners", default="scan,monitor,bleak")
    parser.add_argument("--small", default="1000,10000")
    parser.add_argument("--large", default="2000,20000")
    parser.add_argument("--rss", default="10000,100000", help="the native runs' flood")
    parser.add_argument("--bleak-small", default=None,
                        help="bleak's floods, if smaller (callgrind is slow on Python)")
    parser.add_argument("--bleak-large", default=None)
    parser.add_argument("--no-rss", action="store_true")
    parser.add_argument("--no-callgrind", action="store_true")
    parser.add_argument("--where", action="store_true",
                        help="then where each blekit scanner's instructions per report go, layer"
                             " by layer (bench/where.py)")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = args.scanners.split(",")
    table = scanners(args)

    def sizes(name):
        small, large = args.small, args.large
        if name == "bleak":
            small, large = args.bleak_small or small, args.bleak_large or large
        return [tuple(int(x) for x in s.split(",")) for s in (small, large)]

    results = {}
    for name in names:
        argv, marker = table[name]
        env = {"LD_PRELOAD": args.shim} if name != "bleak" else {}
        row = results[name] = {}
        if not args.no_callgrind:
            counts = []
            for devices, changes in sizes(name):
                print("scan.py: %s under callgrind, %d devices + %d changes..."
                      % (name, devices, changes), file=sys.stderr, flush=True)
                run = Run(args, flood(devices, changes))
                prefix = "cg.%s." % name
                started = time.monotonic()
                try:
                    run.scan(name, ["valgrind", "--tool=callgrind", "--trace-children=yes",
                                    "--callgrind-out-file=" + os.path.join(run.dir, prefix)
                                    + "%p", *argv], marker, env)
                finally:
                    run.close()
                counts.append((devices + changes, callgrind_total(run.dir, prefix),
                               time.monotonic() - started))
                row.setdefault("files", []).append(",".join(
                    os.path.join(run.dir, f) for f in sorted(os.listdir(run.dir))
                    if f.startswith(prefix)))
            (r1, i1, _), (r2, i2, _) = counts
            row["per_report"] = (i2 - i1) / (r2 - r1)
            row["counts"] = counts
        if not args.no_rss:
            devices, changes = (int(x) for x in args.rss.split(","))
            for label, generations, keep in (("1 gen", 1, False), ("3 gen", 3, False),
                                             ("3 gen kept", 3, True)):
                print("scan.py: %s natively, %s of %d devices + %d changes..."
                      % (name, label, devices, changes), file=sys.stderr, flush=True)
                run = Run(args, flood(devices, changes, generations, keep))
                started = time.monotonic()
                try:
                    usage, _ = run.scan(name, argv, marker)
                finally:
                    run.close()
                reports = generations * (devices + changes)
                row[label] = (usage.ru_maxrss, (usage.ru_utime + usage.ru_stime) / reports * 1e6,
                              time.monotonic() - started)

    print("scanning at scale: instructions per report (callgrind) and peak RSS (native)")
    print("%-9s %14s %10s %12s %12s %14s %14s" % (
        "scanner", "instr/report", "x bleak", "RSS 1 gen", "RSS 3 gen", "RSS 3 kept",
        "CPU us/report"))
    for name in names:
        row = results[name]
        per = row.get("per_report")
        bleak = results.get("bleak", {}).get("per_report")
        rss = ["%9d KiB" % row[label][0] if label in row else "-"
               for label in ("1 gen", "3 gen", "3 gen kept")]
        print("%-9s %14s %10s %12s %12s %14s %14s" % (
            name, "%.0f" % per if per else "-",
            "%.3fx" % (per / bleak) if per and bleak else "-", *rss,
            "%.1f" % row["1 gen"][1] if "1 gen" in row else "-"))
    for name in names:
        for devices_changes, count, seconds in results[name].get("counts", []):
            print("  %-8s %7d reports: %14d instructions (%.0f s under callgrind)"
                  % (name, devices_changes, count, seconds))
    for name in names:
        files = results[name].get("files")
        if not args.where or name == "bleak" or not files:
            continue
        (r1, _, _), (r2, _, _) = results[name]["counts"]
        print()
        print("%s, per report (bench/where.py):" % name, flush=True)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "where.py"),
                        "--units", str(r2 - r1), "--label", name, "--small", files[0],
                        "--large", files[1], "--top", "10"], check=True)


if __name__ == "__main__":
    main()
