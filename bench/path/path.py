"""The instructions `blekit scan` executes for one scan report, natively under valgrind
(callgrind), against fake_bluetoothd.py on a private bus: a deterministic figure for the path
whose time the lab's discovery benchmark measures (and whose noise it suffers).

Usage: path.py BLEKIT SHIM OUT [--reports N] [--top K]

blekit runs `scan -a hci0 --service fff0` on a pseudo-terminal (the live table, as in the lab
benchmark). Costs are collected only inside the D-Bus reading thread's handling of incoming
data (DBusConnection.handleWatch), and split at the `write` of the table: "before the write" is
the path a user waits for, "after it" the rest of that signal's handling (the object tree's
full reading, for instance). Printed per report: instructions, distinct instructions and the
4 KiB code pages they fall on (under the lab's emulated CPU, code run once after a context
switch is what costs), by library; then the functions with the most instructions before the
write in the first report. A second run, collecting every thread from the start, gives the
code report 1 runs before the write that the process had not run before the report (start-up,
the rehearsal, earlier messages): under the emulated CPU that code is translated on the path."""
import argparse
import collections
import glob
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Profile:
    """One callgrind dump: exclusive instructions per (object, function), and the distinct
    instruction addresses per object."""

    def __init__(self, path, names):
        self.trigger = ""
        self.cost = collections.Counter()
        self.addresses = collections.defaultdict(set)
        self.functions = collections.defaultdict(set)
        ob = fn = None
        address, after_call = 0, False
        with open(path, errors="replace") as lines:
            for line in lines:
                line = line.rstrip("\n")
                if line.startswith("desc: Trigger:"):
                    self.trigger = line.split(":", 2)[2].strip()
                    continue
                spec = re.match(r"^(ob|fn|cob|cfn|fl|fi|fe|cfi|cfl|calls)=(.*)", line)
                if spec:
                    key, value = spec.groups()
                    if key in ("ob", "cob"):
                        name = self.name(names["ob"], value)
                        ob = name if key == "ob" else ob
                    elif key in ("fn", "cfn"):
                        name = self.name(names["fn"], value)
                        fn = name if key == "fn" else fn
                    elif key == "calls":
                        after_call = True  # the next line is a call's inclusive cost
                    continue
                if not line or line[0] not in "+-*0123456789":
                    continue
                fields = line.split()
                position = fields[0]
                if position.startswith("0x"):
                    current = int(position, 16)
                elif position[0] in "+-":
                    current = address + int(position, 0)  # "+12", "-3", "+0x1a"
                else:
                    current = address
                if after_call:
                    after_call = False
                    continue
                address = current
                count = int(fields[2]) if len(fields) > 2 else 0
                self.cost[(ob, fn)] += count
                self.addresses[ob].add(current)
                self.functions[(ob, fn)].add(current)

    @staticmethod
    def name(table, value):
        """callgrind's name compression: "(id) name" defines, "(id)" refers."""
        found = re.match(r"\((\d+)\)\s*(.*)", value)
        if not found:
            return value
        key, name = found.groups()
        if name:
            table[key] = name
        return table.get(key, "?" + key)

    @property
    def total(self):
        return sum(self.cost.values())


def merged(profiles):
    result = Profile.__new__(Profile)
    result.trigger, result.cost = "merged", collections.Counter()
    result.addresses = collections.defaultdict(set)
    result.functions = collections.defaultdict(set)
    for profile in profiles:
        result.cost.update(profile.cost)
        for ob, addresses in profile.addresses.items():
            result.addresses[ob] |= addresses
        for key, addresses in profile.functions.items():
            result.functions[key] |= addresses
    return result


def library(ob):
    return os.path.basename(ob or "?")


def run(args, work, reports, whole=False):
    """blekit scan under callgrind until `reports` reports are in; `whole` collects every
    thread from the start (for what ran before a report), else only the reading thread's
    handling."""
    daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = daemon.stdout.readline().strip()
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address, REPORTS=str(reports))
    fake = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_bluetoothd.py")], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        if fake.stdout.readline().strip() != "ready":
            sys.exit("bench-path: the fake bluetoothd did not start")
        # 2 s between restarts: the first start, then one report per restart, then slack.
        seconds = 2 * (reports + 1) + 3
        collect = ["--collect-atstart=yes"] if whole else ["--toggle-collect=*handleWatch*"]
        argv = ["valgrind", "--tool=callgrind", "--dump-instr=yes", *collect,
                "--dump-before=write",
                "--callgrind-out-file=" + work + "/callgrind.out.%p",
                args.blekit, "scan", "-a", "hci0", "--service", "fff0",
                "--timeout", str(seconds)]
        master, slave = pty.openpty()
        scan = subprocess.Popen(argv, env=dict(env, LD_PRELOAD=args.shim), stdin=slave,
                                stdout=slave, stderr=subprocess.PIPE, close_fds=True)
        os.close(slave)
        screen = b""
        deadline = time.monotonic() + seconds * 4 + 60
        while scan.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
        # The terminal closes as blekit exits, a moment before the process can be reaped.
        try:
            scan.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            scan.kill()
            sys.exit("bench-path: blekit scan did not end in time")
        errors = scan.stderr.read().decode(errors="replace")
        if scan.returncode != 0:
            sys.exit("bench-path: blekit scan exited %d:\n%s" % (scan.returncode, errors[-2000:]))
        shown = screen.decode(errors="replace")
        for n in range(1, reports + 1):
            if "00:AA:01:01:00:%02X" % n not in shown:
                sys.exit("bench-path: report %d never reached the table" % n)
    finally:
        fake.terminate()
        daemon.terminate()
        fake.wait()
        daemon.wait()


def profiles_in(work):
    files = sorted(glob.glob(work + "/callgrind.out.*.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    names = {"ob": {}, "fn": {}}
    return [Profile(path, names) for path in files]  # in order: names are defined once


def report_window(profiles, n):
    """Indices of report n's dumps: the one that frames it from before ("before-n"), the dump
    at the table's first write after the signal, and the one after its handling ("report-n")."""
    start = next(i for i, p in enumerate(profiles) if p.trigger == "dump before-%d" % n)
    end = next(i for i, p in enumerate(profiles) if p.trigger == "dump report-%d" % n)
    write = next((i for i in range(start + 1, end + 1)
                  if profiles[i].trigger.endswith("dump-before=write") and profiles[i].total > 0),
                 None)
    if write is None:
        sys.exit("bench-path: no write of the table after report %d" % n)
    return start, write, end


def reports(work, count):
    """Per report: the profile up to the table's write, and the rest of that signal's handling."""
    profiles = profiles_in(work)
    result = []
    for n in range(1, count + 1):
        _, write, end = report_window(profiles, n)
        result.append((profiles[write], merged(profiles[write + 1:end + 1])))
    return result


def first_run(work):
    """What report 1 runs before the table's write that the process had not run before the
    report came (for all its start-up and rehearsal): under the lab's emulated CPU that code is
    translated on the path, for every new process (its libraries load at new addresses).
    Returns (before report 1, report 1 up to the write)."""
    profiles = profiles_in(work)
    start, write, _ = report_window(profiles, 1)
    return merged(profiles[:start + 1]), merged(profiles[start + 1:write + 1])


def new_code(earlier, path, top):
    """Prints the instructions of `path` that `earlier` never ran, by library and function."""
    fresh = {ob: addresses - earlier.addresses.get(ob, set())
             for ob, addresses in path.addresses.items()}
    count = sum(len(a) for a in fresh.values())
    print("\nreport 1 up to the write, collected in every thread: %s distinct instructions, %s "
          "of them never run before the report (on %d code pages)" % (
              f"{sum(len(a) for a in path.addresses.values()):,}", f"{count:,}",
              sum(len({x >> 12 for x in a}) for a in fresh.values())))
    by_library = collections.Counter()
    for ob, addresses in fresh.items():
        by_library[library(ob)] += len(addresses)
    for name, n in by_library.most_common():
        if n:
            print("  %-32s %7s" % (name, f"{n:,}"))
    print("functions with the most instructions first run on report 1's path:")
    by_function = collections.Counter()
    for (ob, fn), addresses in path.functions.items():
        by_function[(ob, fn)] = len(addresses - earlier.addresses.get(ob, set()))
    for (ob, fn), n in by_function.most_common(top):
        if n:
            print("  %6s  %-22s %s" % (f"{n:,}", library(ob)[:22], fn))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("blekit")
    parser.add_argument("shim")
    parser.add_argument("out")
    parser.add_argument("--reports", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    whole = os.path.join(args.out, "whole")
    for directory in (args.out, whole):
        os.makedirs(directory, exist_ok=True)
        for stale in glob.glob(directory + "/callgrind.out.*"):
            os.remove(stale)
    run(args, whole, 1, whole=True)
    earlier, path = first_run(whole)
    run(args, args.out, args.reports)
    measured = reports(args.out, args.reports)
    print("instructions per scan report (%s, valgrind %s)" % (
        args.blekit, subprocess.run(["valgrind", "--version"], capture_output=True,
                                    text=True).stdout.strip()))
    print("%-7s %14s %12s %14s %12s %10s" % ("report", "before write", "after it",
                                             "distinct before", "code pages", "total"))
    for n, (before, after) in enumerate(measured, 1):
        distinct = sum(len(a) for a in before.addresses.values())
        pages = sum(len({x >> 12 for x in a}) for a in before.addresses.values())
        print("%-7d %14s %12s %14s %12d %10s" % (n, f"{before.total:,}", f"{after.total:,}",
                                                 f"{distinct:,}", pages,
                                                 f"{before.total + after.total:,}"))
    before = measured[0][0]
    print("\nbefore the write, report 1, by library: instructions, distinct, code pages")
    by_library = collections.Counter()
    for (ob, _), count in before.cost.items():
        by_library[library(ob)] += count
    for name, count in by_library.most_common():
        addresses = set().union(*(a for ob, a in before.addresses.items() if library(ob) == name))
        print("  %-32s %9s %7s %5d" % (name, f"{count:,}", f"{len(addresses):,}",
                                      len({x >> 12 for x in addresses})))
    print("\nbefore the write, report 1, functions with the most instructions (exclusive):")
    for (ob, fn), count in before.cost.most_common(args.top):
        print("  %8s  %-22s %s" % (f"{count:,}", library(ob)[:22], fn))
    new_code(earlier, path, args.top)
    print("\ncallgrind's dumps are in %s (callgrind_annotate reads them)" % args.out)


if __name__ == "__main__":
    main()
