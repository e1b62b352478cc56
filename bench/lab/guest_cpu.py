#!/usr/bin/python3
"""guest_cpu.py: where a lab guest's CPU goes, second by second.

  guest_cpu.py record OUT SECONDS    (inside the lab, in the background beside a benchmark)
      every second, until SECONDS have passed or the file OUT.stop exists, appends one JSON
      line to OUT: the monotonic time, /proc/stat's cpu line (ticks) and every process's
      user + system ticks ("comm:pid").
  guest_cpu.py report OUT [STEP]     (anywhere, on a finished recording)
      one line per STEP samples (default 1): the guest's busy share of all its vCPUs, split
      into user, system and softirq, and the six processes that used the most CPU, in percent
      of one vCPU.

It found what bounded the lab's two-host GATT transfers (docs/benchmarks.md, the lab's ceiling):
btmon's capture and bluetoothd's debug log, not blekit. The sampler itself costs 10-25% of a
vCPU under TCG (runs of 2026-12-05).
"""
import json
import os
import sys
import time


def record(out, seconds):
    end = time.monotonic() + seconds
    with open(out, "w") as f:
        while time.monotonic() < end and not os.path.exists(out + ".stop"):
            with open("/proc/stat") as stat:
                cpu = [int(x) for x in stat.readline().split()[1:]]
            procs = {}
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/stat") as stat:
                        text = stat.read()
                except OSError:
                    continue
                comm = text[text.index("(") + 1:text.rindex(")")]
                fields = text[text.rindex(")") + 2:].split()
                ticks = int(fields[11]) + int(fields[12])  # utime, stime
                if ticks:
                    procs[f"{comm}:{pid}"] = ticks
            f.write(json.dumps({"t": time.monotonic(), "cpu": cpu, "p": procs}) + "\n")
            f.flush()
            time.sleep(1.0)


def report(path, step):
    hz = os.sysconf("SC_CLK_TCK")
    rows = [json.loads(line) for line in open(path)]
    for a, b in zip(rows[::step], rows[step::step]):
        ticks = [y - x for x, y in zip(a["cpu"], b["cpu"])]
        total = sum(ticks) or 1
        idle = ticks[3] + ticks[4]  # idle, iowait
        seconds = b["t"] - a["t"]
        used = {k: v - a["p"].get(k, 0) for k, v in b["p"].items()}
        top = sorted(((v, k) for k, v in used.items() if v > 0), reverse=True)[:6]
        names = " ".join(f"{k.split(':')[0]}={100 * v / hz / seconds:.0f}%" for v, k in top)
        print(f"{a['t']:9.1f} s busy {100 * (1 - idle / total):5.1f}% (user "
              f"{100 * ticks[0] / total:4.1f}, system {100 * ticks[2] / total:4.1f}, softirq "
              f"{100 * ticks[6] / total:4.1f}) | {names}")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "record":
        record(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "report":
        report(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
