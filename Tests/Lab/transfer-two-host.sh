#!/usr/bin/env bash
# The scripted test between two Linux hosts that the mission names: host B runs
# `blekit advertise --message M --once`, host A runs `blekit receive` and must print exactly M;
# then B sends 1 MiB with `advertise --l2cap` and A's `receive --l2cap` must get it exact.
# Each host has its own dbus-daemon and bluetoothd (stock configuration). Run it as:
#
#   scripts/lab two-host --a 'Tests/Lab/transfer-two-host.sh' --b 'Tests/Lab/transfer-two-host.sh'
#
# BLEKIT defaults to $BLEKIT or .build/debug/blekit. Host A prints "N passed, M failed" and
# exits 1 on failure; host B exits with its first failing advertise's status.
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
# Then the same over an L2CAP channel: B `advertise --l2cap --file` 1 MiB of random bytes
# (written by B into $LAB_SHARED), A `receive --l2cap`, byte-exact (framing version 2: the
# sender waits for the receiver's window, docs/l2cap.md).
L2CAP_FILE=$SHARED/l2cap-1m.bin
case ${LAB_HOST:-} in
  b)
    head -c 1048576 /dev/urandom >"$L2CAP_FILE.part" && mv "$L2CAP_FILE.part" "$L2CAP_FILE"
    n=600
    until [[ -e $SHARED/a-scanning ]]; do
      ((n-- > 0)) || { echo "B: host A never started scanning" >&2; exit 1; }
      sleep 0.2
    done
    "$BLEKIT" advertise --message "$message" --once --timeout 150 --name blekit-b
    rc=$?
    n=900
    until [[ -e $SHARED/a-scanning-l2cap ]]; do
      ((n-- > 0)) || { echo "B: host A never started the L2CAP receive" >&2; exit 1; }
      sleep 0.2
    done
    "$BLEKIT" advertise --l2cap --file "$L2CAP_FILE" --once --timeout 150 --name blekit-b
    l2cap_rc=$?
    echo "B: advertise exit $rc, advertise --l2cap exit $l2cap_rc"
    ((rc == 0)) && exit "$l2cap_rc"
    exit "$rc"
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
      ok "host A printed exactly host B's message ($(printf '%s' "$message" | wc -c) bytes)"
    else
      fail "receive exit $rc; got $(head -c 200 "$OUT/received.txt")"
    fi
    # /tmp, not the 9p results directory: the receiver should not wait on the host's disk.
    "$BLEKIT" receive --l2cap --timeout 120 >/tmp/l2cap-1m.out 2>"$OUT/receive-l2cap.err" &
    receiver=$!
    started=$SECONDS
    wait_discovering hci0 30
    : >"$SHARED/a-scanning-l2cap"
    wait "$receiver"
    rc=$?
    cat "$OUT/receive-l2cap.err" >&2
    if ((rc == 0)) && cmp -s "$L2CAP_FILE" /tmp/l2cap-1m.out; then
      ok "receive --l2cap: host B's 1 MiB arrived byte-exact over an L2CAP channel ($((SECONDS - started)) s with the scan)"
    else
      fail "receive --l2cap exit $rc, $(stat -c %s /tmp/l2cap-1m.out) bytes: $(head -c 300 "$OUT/receive-l2cap.err" | tr '\n' ' ')"
    fi
    finish_suite
    ;;
  *)
    echo "run me with scripts/lab two-host (LAB_HOST must be a or b)" >&2
    exit 2
    ;;
esac
