#!/usr/bin/env bash
# Lab test of per-central notification: one `blekit advertise` (hci1) and two independent
# centrals (peripheral-central.py on hci0 and hci2, AcquireNotify) at once. Where bluetoothd
# gives a GATT server one notify socket per central that reaches that central only (BlueZ
# 5.76 and later: Debian 13's 5.82), each central gets the whole message exactly once, sent
# to it alone, and a central that stays subscribed after its message receives nothing while
# the server sends the other one's. Runs in an air with extended advertising (the server
# keeps advertising while a central is connected), i.e. Bumble's:
#
#   scripts/lab run --debian 13 --controllers 0 --bumble 3 -- Tests/Lab/per-central.sh
#
# On BlueZ 5.66 (Debian 12) bluetoothd asks for one socket only, for the first central, and
# never reports the second: this test is for 5.76 and later (Tests/Lab/run-all: per-central).
# Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
CENTRAL=(/usr/bin/python3 "$PWD/Tests/Lab/peripheral-central.py")
OUT=${LAB_RESULTS:-/tmp}/per-central
mkdir -p "$OUT"

echo "# bluetoothd $(/usr/libexec/bluetooth/bluetoothd --version), Debian ${LAB_DEBIAN:-12}"
# 128 KiB: long enough that the second central subscribes while the first one's message is
# still going out.
head -c 98304 /dev/urandom | base64 -w0 >"$OUT/message.txt"

"$BLEKIT" advertise -a hci1 --file "$OUT/message.txt" >"$OUT/adv.out" 2>"$OUT/adv.err" &
adv=$!
sleep 2
timeout 200 "${CENTRAL[@]}" --adapter hci0 --mode acquire --linger 12 --timeout 120 \
  --out "$OUT/a.received" 2>"$OUT/a.err" &
a=$!
sleep 2
timeout 200 "${CENTRAL[@]}" --adapter hci2 --mode acquire --linger 12 --timeout 120 \
  --out "$OUT/b.received" 2>"$OUT/b.err" &
b=$!
wait "$a"
arc=$?
wait "$b"
brc=$?
kill -INT "$adv" 2>/dev/null
wait "$adv"
echo "# advertise: exit $?, stderr: $(head -c 300 "$OUT/adv.err" | tr '\n' ' ')"

for side in a b; do
  rc=$arc
  [[ $side == b ]] && rc=$brc
  echo "# central $side: exit $rc; $(tr '\n' ' ' <"$OUT/$side.err" | tail -c 400)"
  if ((rc == 0)) && cmp -s "$OUT/message.txt" "$OUT/$side.received"; then
    ok "central $side received the whole message exactly once ($(stat -c %s "$OUT/$side.received") bytes)"
  else
    fail "central $side: exit $rc, $(stat -c %s "$OUT/$side.received" 2>/dev/null || echo no) bytes"
  fi
  extra=$(sed -n 's/.*after the end, subscribed [0-9]* s more: \([0-9]*\) values.*/\1/p' "$OUT/$side.err")
  if [[ $extra == 0 ]]; then
    ok "central $side, still subscribed, received nothing while the other was notified"
  else
    fail "central $side received ${extra:-?} values after its message"
  fi
done

finish_suite
