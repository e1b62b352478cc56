#!/usr/bin/env bash
# Lab experiment (by hand, not in run-all): raw LE CoC ordering with slow receivers, to tell the
# kernel's receive path from blekit's (issue 18's swapped SDUs, docs/l2cap.md). Builds
# Tests/Lab/l2cap-order.c on the host first, then:
#
#   gcc -O2 -o results/l2cap-order Tests/Lab/l2cap-order.c
#   flock /tmp/blekit-lab.lock scripts/lab run -- Tests/Lab/l2cap-order.sh results/l2cap-order
#
# Each round prints the server's line: SDUs, bytes, out of order, bad length, corrupt.
set -u
PROBE=${1:?usage: l2cap-order.sh PROBE-BINARY}
A0=00:AA:01:00:00:00
A1=00:AA:01:01:00:01
# The emulated controller takes a connection only while it advertises connectably.
btmgmt -i 1 connectable on >/dev/null 2>&1
btmgmt -i 1 advertising on >/dev/null 2>&1
sleep 1
status=0
# round NAME PSM EVERY MS: 1,600 SDUs (about 1 MiB), the server sleeping MS ms every EVERY SDUs.
round() {
  echo "== round $1 (sleep $4 ms every $3 SDUs)"
  timeout 150 "$PROBE" server $A1 "$2" 1600 "$3" "$4" >"/tmp/order.$1" 2>&1 &
  local server=$!
  sleep 0.5
  timeout 150 "$PROBE" client $A0 $A1 "$2" 1600 2>&1 | tail -n 1
  wait "$server" || status=1
  cat "/tmp/order.$1"
  btmgmt -i 1 advertising on >/dev/null 2>&1
  sleep 1
}
round fast 131 0 0
round slow20 133 20 20
round slow200 135 200 300
round slow50 137 50 100
round slow1 139 1 5
exit $status
