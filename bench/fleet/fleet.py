"""Gateways at a flood, natively: `blekit monitor --mqtt` and Theengs Gateway (PyPI
`TheengsGateway`, which scans through bleak) each read the same flood of advertisements from
the stand-in bluetoothd of bench/scan (fake_flood.py: DEVICES distinct devices with a
FolkBears-shaped ManufacturerData, then CHANGES PropertiesChanged of RSSI and
ManufacturerData, round robin, then a last device named END) and publish to a real mosquitto
on a loopback port; a mosquitto_sub counts what the broker delivered.

Per gateway: sightings delivered, the gateway's CPU (user + system, from wait4) and its
sightings per CPU second; the ratio blekit / Theengs. Theengs publishes every advertisement
(`--publish_all 1`, its default; scanning without its default 7 s on / 5 s off cycle, which
misses what comes while off), blekit every sighting (`--mqtt-interval 0`): the same
stream, each gateway's own payload.

With --memory-minutes M: `blekit monitor --mqtt` alone for M minutes under a continuous flood
paced at --rate signals per second (default 2,000; generations of DEVICES devices that vanish
after CHANGES changes), VmRSS every 30 s.

Usage: fleet.py --blekit PATH --pylib DIR --work DIR [--devices N] [--changes N]
                [--memory-minutes M] [--gateways blekit,theengs]"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scan"))
import scan  # noqa: E402  (the private bus and the stand-in bluetoothd)

END_ID = "ee" * 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A mosquitto on a loopback port, and a subscriber writing every message to a file."""

    def __init__(self, directory):
        self.port = free_port()
        config = os.path.join(directory, "mosquitto.conf")
        with open(config, "w") as out:
            out.write("listener %d 127.0.0.1\nallow_anonymous true\nuser %s\n"
                      "max_queued_messages 0\n" % (self.port, os.environ.get("USER", "root")))
        self.process = subprocess.Popen(["mosquitto", "-c", config],
                                        stderr=open(os.path.join(directory, "mosquitto.log"), "w"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.messages = os.path.join(directory, "messages.txt")
        self.sub = subprocess.Popen(["mosquitto_sub", "-p", str(self.port), "-v", "-t", "#"],
                                    stdout=open(self.messages, "w"))
        time.sleep(0.5)

    def count(self, prefix, settle=2.0):
        """Messages under `prefix`, once no new one has come for `settle` seconds."""
        last, since = -1, time.monotonic()
        while True:
            with open(self.messages, "rb") as f:
                n = sum(1 for line in f if line.startswith(prefix.encode()))
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= settle:
                return n
            time.sleep(0.2)

    def seen(self, text):
        with open(self.messages, "rb") as f:
            return text.encode() in f.read()

    def close(self):
        for process in (self.sub, self.process):
            process.terminate()
            process.wait()


def gateways(args, port):
    url = "mqtt://127.0.0.1:%d" % port
    return {
        "blekit": dict(
            argv=[args.blekit, "monitor", "-a", "hci0", "--json", "--mqtt", url,
                  "--gateway", "bench", "--mqtt-interval", "0", "--mqtt-buffer", "1000000"],
            prefix="blekit/bench/ids/", end="blekit/bench/ids/" + END_ID, env={}),
        "theengs": dict(
            argv=[sys.executable, "-m", "TheengsGateway", "-H", "127.0.0.1", "-P", str(port),
                  "-a", "hci0", "-pt", "home/TheengsGateway/BTtoMQTT", "-pa", "1", "-D", "0",
                  "-pr", "0", "-ll", "WARNING", "-sd", "86400", "-tb", "1", "-c", os.path.join(args.work, "theengsgw.conf")],
            prefix="home/TheengsGateway/BTtoMQTT/", end="home/TheengsGateway/BTtoMQTT/FF00FFFFFF42",
            env={"PYTHONPATH": args.pylib}),
    }


def stop(process):
    """SIGINT, then SIGTERM and SIGKILL after 10 s each (Theengs does not always end on
    SIGINT); the child's resource usage."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        process.send_signal(sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, _, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = 0
                return usage
            time.sleep(0.1)
    return None


def run_gateway(args, name, spec, flood):
    run = scan.Run(args, flood)
    broker = Broker(run.dir)
    try:
        spec = gateways(args, broker.port)[name]
        process = subprocess.Popen(spec["argv"], env=dict(run.env, **spec["env"]),
                                   stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(run.dir, name + ".err"), "w"))
        started = time.monotonic()
        # The END device is the flood's last: its sighting (blekit's ID topic, or for Theengs
        # any message naming its address) means the gateway has read everything before it.
        end = spec["end"]
        while not broker.seen(end):
            if process.poll() is not None:
                sys.exit("fleet.py: %s ended early (%s)" % (name, run.dir))
            if time.monotonic() - started > args.limit:
                print("fleet.py: %s did not publish END within %d s" % (name, args.limit),
                      file=sys.stderr)
                break
            time.sleep(0.2)
        delivered = broker.count(spec["prefix"])
        elapsed = time.monotonic() - started
        usage = stop(process)
        cpu = usage.ru_utime + usage.ru_stime if usage else float("nan")
        return {"delivered": delivered, "cpu": cpu, "elapsed": elapsed,
                "rss": usage.ru_maxrss if usage else 0}
    finally:
        broker.close()
        run.close()


def memory(args):
    flood = dict(scan.flood(args.devices, args.changes, generations=100000),
                 RATE=str(args.rate))
    run = scan.Run(args, flood)
    broker = Broker(run.dir)
    spec = gateways(args, broker.port)["blekit"]
    process = subprocess.Popen(spec["argv"], env=run.env, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(run.dir, "memory.err"), "w"))
    samples = []
    try:
        end = time.monotonic() + args.memory_minutes * 60
        while time.monotonic() < end:
            time.sleep(30)
            with open("/proc/%d/status" % process.pid) as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
            samples.append(rss)
            print("fleet.py: monitor --mqtt RSS %d KiB after %.1f min"
                  % (rss, len(samples) / 2), file=sys.stderr, flush=True)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait()
        delivered = broker.count("blekit/bench/ids/", settle=1)
        broker.close()
        run.close()
    return samples, delivered


def main():
    parser = argparse.ArgumentParser()
    for option in ("--blekit", "--pylib", "--work"):
        parser.add_argument(option, required=True)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=10000)
    parser.add_argument("--gateways", default="blekit,theengs")
    parser.add_argument("--memory-minutes", type=float, default=0)
    parser.add_argument("--limit", type=int, default=900)
    parser.add_argument("--rate", type=int, default=2000,
                        help="signals per second in the memory run")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    flood = scan.flood(args.devices, args.changes)
    results = {}
    for name in args.gateways.split(","):
        print("fleet.py: %s, %d devices + %d changes..." % (name, args.devices, args.changes),
              file=sys.stderr, flush=True)
        results[name] = run_gateway(args, name, None, flood)
    reports = args.devices + args.changes + 1
    print("gateways at a flood of %d reports (%d devices + %d changes + END)"
          % (reports, args.devices, args.changes))
    print("%-8s %10s %9s %9s %14s %12s" % ("gateway", "delivered", "CPU s", "wall s",
                                             "sightings/CPU s", "peak RSS KiB"))
    for name, row in results.items():
        rate = row["delivered"] / row["cpu"] if row["cpu"] else float("nan")
        row["rate"] = rate
        print("%-8s %10d %9.2f %9.1f %14.0f %12d" % (name, row["delivered"], row["cpu"],
                                                      row["elapsed"], rate, row["rss"]))
    if "blekit" in results and "theengs" in results and results["theengs"]["rate"]:
        ratio = results["blekit"]["rate"] / results["theengs"]["rate"]
        print("blekit / Theengs, sightings per CPU second: %.1fx (target >= 5x: %s)"
              % (ratio, "met" if ratio >= 5 else "NOT met"))
    if args.memory_minutes > 0:
        samples, delivered = memory(args)
        if samples:
            growth = samples[-1] - samples[0]
            print("monitor --mqtt over %.1f minutes: VmRSS %d -> %d KiB (%+d KiB from the first "
                  "sample; target < 2048: %s), %d sightings delivered"
                  % (len(samples) / 2, samples[0], samples[-1], growth,
                     "met" if growth < 2048 else "NOT met", delivered))


if __name__ == "__main__":
    main()
