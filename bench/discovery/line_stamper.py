#!/usr/bin/python3
# A scanner's reader for bench/discovery/trials.py: reads the scanner's terminal (the pty's
# master side, given as standard input) and passes every chunk on to standard output, framed
# as "<CLOCK_MONOTONIC seconds> <length>\n" and the bytes, stamped the moment its read returned.
#
# It is the benchmark's measuring instrument, so it is made to react at once and alike for
# every scanner:
# - a process of its own: a reading thread inside the benchmark had to wait for Python's global
#   interpreter lock while the main thread handled the registration's reply, which delayed the
#   stamp of a line arriving at that moment by up to 2-3 ms (seen with --ftrace);
# - real-time scheduling (SCHED_FIFO) when allowed, so that a woken reader does not wait behind
#   the advertiser, bluetoothd or the scanner itself on the guest's two CPUs;
# - one rehearsal of its loop at start (an empty frame), so that a scanner whose first output
#   is the discovery (bleak prints nothing before it) is not stamped late by this process
#   loading its own code.
import os
import sys
import time


def main():
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        pass
    out = sys.stdout.buffer
    data = b""
    while True:
        now = time.monotonic()
        out.write(b"%.9f %d\n" % (now, len(data)) + data)
        out.flush()
        try:
            data = os.read(0, 65536)
        except OSError:  # EIO: the scanner and everything else holding the terminal are gone
            data = b""
        if not data:
            break


if __name__ == "__main__":
    main()
