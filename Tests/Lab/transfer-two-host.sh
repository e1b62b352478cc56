#!/usr/bin/env bash
# The scripted test between two Linux hosts that the mission names: host B runs
# `blekit advertise --message M --once`, host A runs `blekit receive` and must print exactly M.
# Each host has its own dbus-daemon and bluetoothd (stock configuration). Run it as:
#
#   scripts/lab two-host --a 'Tests/Lab/transfer-two-host.sh' --b 'Tests/Lab/transfer-two-host.sh'
#
# BLEKIT defaults to $BLEKIT or .build/debug/blekit. Host A prints "N passed, M failed" and
# exits 1 on failure; host B exits with advertise's status.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/transfer-two-host
mkdir -p "$OUT"
# Multi-byte text, an EOM inside, and more than one chunk: 3 x 1000 characters.
message=$(for i in $(seq 1 60); do printf 'Grüße %02d from host B — EOM is just text here. ' "$i"; done)

# A scans first and says so in $LAB_SHARED/a-scanning; B switches its advertisement on only
# then: the emulated radio reports an advertiser at the moment its advertising switches on, and
# a scan that starts later can miss it (docs/lab.md).
SHARED=${LAB_SHARED:-/tmp}
case ${LAB_HOST:-} in
  b)
    n=600
    until [[ -e $SHARED/a-scanning ]]; do
      ((n-- > 0)) || { echo "B: host A never started scanning" >&2; exit 1; }
      sleep 0.2
    done
    "$BLEKIT" advertise --message "$message" --once --timeout 150 --name blekit-b
    ;;
  a)
    "$BLEKIT" receive --timeout 120 >"$OUT/received.txt" 2>"$OUT/receive.err" &
    receiver=$!
    wait_discovering hci0 30
    : >"$SHARED/a-scanning"
    wait "$receiver"
    rc=$?
    cat "$OUT/receive.err" >&2
    if ((rc == 0)) && cmp -s <(printf '%s' "$message") "$OUT/received.txt"; then
      echo "ok   host A printed exactly host B's message ($(printf '%s' "$message" | wc -c) bytes)"
      echo "1 passed, 0 failed"
    else
      echo "FAIL receive exit $rc; got $(head -c 200 "$OUT/received.txt")"
      echo "0 passed, 1 failed"
      exit 1
    fi
    ;;
  *)
    echo "run me with scripts/lab two-host (LAB_HOST must be a or b)" >&2
    exit 2
    ;;
esac
