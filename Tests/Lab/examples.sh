#!/usr/bin/env bash
# Lab check of Examples/ (issue 16): the Heart Rate peripheral on hci1 and the Heart Rate
# central on hci0 (the central prints the values the peripheral sent, then both exit by
# themselves); Ctrl-C on each side; the transfer pair, byte-exact. Runs inside the lab, in one
# boot:
#
#   scripts/lab run -- Tests/Lab/examples.sh [BIN-DIR]
#
# BIN-DIR (default $EXAMPLES_BIN or .build/debug) holds the example-* programs (scripts/test
# builds them). With $BLEKIT set to the CLI, it also reads the Device Information service. Each check prints "ok" or "FAIL"; the last line is "N passed, M failed"; the
# exit status is 1 if any failed. Outputs are kept in $LAB_RESULTS/examples.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BIN=${1:-${EXAMPLES_BIN:-$PWD/.build/debug}}
OUT=${LAB_RESULTS:-/tmp}/examples
mkdir -p "$OUT"

for program in example-heart-rate-peripheral example-heart-rate-central example-transfer; do
  if [[ ! -x $BIN/$program ]]; then
    fail "$BIN/$program is not built (swift build --product $program)"
    finish_suite
  fi
done

# finish PID SECONDS: waits up to SECONDS for PID to exit by itself, then stops it (SIGKILL);
# sets STATUS to its exit status (137 when it had to be killed).
finish() {
  local pid=$1 n=$(($2 * 10))
  while kill -0 "$pid" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  STATUS=$?
}

# unregistrations: how many UnregisterAdvertisement calls bluetoothd has logged.
unregistrations() { grep -c "unregister_advertisement() UnregisterAdvertisement" \
  "${LAB_BLUETOOTHD_LOG:-/dev/null}"; }

# not_discovering: hci0 has stopped the previous scan (a new one must switch on afresh).
not_discovering() { ! busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 \
  Discovering 2>/dev/null | grep -q true; }

# --- Heart Rate: 5 values from hci1 to hci0 ----------------------------------------------
# The scanner first, then the advertisement (see wait_discovering).
start=$SECONDS
"$BIN/example-heart-rate-central" --adapter hci0 --count 5 --timeout 60 \
  >"$OUT/hr-central.out" 2>"$OUT/hr-central.err" &
central=$!
wait_discovering
"$BIN/example-heart-rate-peripheral" --adapter hci1 --count 5 \
  >"$OUT/hr-peripheral.out" 2>"$OUT/hr-peripheral.err" &
peripheral=$!
wait "$central"
central_rc=$?
took=$((SECONDS - start))
finish "$peripheral" 15
peripheral_rc=$STATUS
sent=$(sed -n 's/^sent \([0-9]*\) bpm$/\1/p' "$OUT/hr-peripheral.out" | xargs)
received=$(sed -n 's/^heart rate \([0-9]*\) bpm$/\1/p' "$OUT/hr-central.out" | xargs)
if ((central_rc == 0)) && [[ $received == "60 61 62 63 64" && $received == "$sent" ]]; then
  ok "heart rate: the central printed the 5 values the peripheral sent ($received) in ${took} s"
else
  fail "heart rate: central exit $central_rc, printed '$received', peripheral sent '$sent';" \
    "$(head -c 300 "$OUT/hr-central.err" | tr '\n' ' ')"
fi
if grep -qx "body sensor location: chest (1)" "$OUT/hr-central.out"; then
  ok "heart rate: the central read Body Sensor Location (chest)"
else
  fail "heart rate: no body sensor location in: $(head -c 300 "$OUT/hr-central.out" | tr '\n' ' ')"
fi
if grep -qx "disconnected" "$OUT/hr-central.out"; then
  ok "heart rate: the central disconnected after the last value"
else
  fail "heart rate: the central did not say it disconnected"
fi
if grep -qx "central 00:AA:01:00:00:00 connected" "$OUT/hr-peripheral.out"; then
  ok "heart rate: the peripheral's connection events said the central connected"
else
  fail "heart rate: no connection event: $(head -c 300 "$OUT/hr-peripheral.out" | tr '\n' ' ')"
fi
if ((peripheral_rc == 0)) && grep -qx "unsubscribed" "$OUT/hr-peripheral.out"; then
  ok "heart rate: the peripheral exited 0 once the central unsubscribed"
else
  fail "heart rate: peripheral exit $peripheral_rc;" \
    "$(head -c 300 "$OUT/hr-peripheral.out" "$OUT/hr-peripheral.err" | tr '\n' ' ')"
fi

# --- Ctrl-C on each side; in between, Device Information read with the blekit CLI ----------
wait_for 10 not_discovering
"$BIN/example-heart-rate-central" --adapter hci0 --count 1000 --timeout 60 \
  >"$OUT/int-central.out" 2>"$OUT/int-central.err" &
central=$!
wait_discovering
"$BIN/example-heart-rate-peripheral" --adapter hci1 --count 0 \
  >"$OUT/int-peripheral.out" 2>"$OUT/int-peripheral.err" &
peripheral=$!
if wait_for 30 grep -q "^heart rate" "$OUT/int-central.out"; then
  # While the central listens, read the Manufacturer Name over its connection (a second
  # connection would need a fresh advertising report, which the emulated radio does not send).
  if [[ -x ${BLEKIT:-} ]]; then
    name=$("$BLEKIT" read -a hci0 00:AA:01:01:00:01 2a29 --text 2>"$OUT/read-2a29.err")
    if [[ $name == blekit ]]; then
      ok "device information: blekit read 2a29 gives the Manufacturer Name 'blekit'"
    else
      fail "device information: read 2a29 gave '$name': $(head -c 300 "$OUT/read-2a29.err")"
    fi
  fi
  kill -INT "$central"
  finish "$central" 15
  central_rc=$STATUS
  # The central's Disconnect takes the link down (bluetoothd waits 2 s, more on a loaded lab).
  if wait_for 20 grep -qx "central 00:AA:01:00:00:00 disconnected" "$OUT/int-peripheral.out"; then
    ok "Ctrl-C: the peripheral's connection events said the central disconnected"
  else
    fail "Ctrl-C: no disconnection event: $(head -c 300 "$OUT/int-peripheral.out" | tr '\n' ' ')"
  fi
  unregistered=$(unregistrations)
  kill -INT "$peripheral"
  finish "$peripheral" 15
  peripheral_rc=$STATUS
  unregistered=$(($(unregistrations) - unregistered))
  if ((central_rc == 130)) && grep -qx "disconnected" "$OUT/int-central.out"; then
    ok "Ctrl-C: the central disconnected and exited 130 while receiving"
  else
    fail "Ctrl-C: the central exited $central_rc: $(head -c 300 "$OUT/int-central.err" | tr '\n' ' ')"
  fi
  if ((peripheral_rc == 130)) && [[ ! -s $OUT/int-peripheral.err ]]; then
    ok "Ctrl-C: the peripheral unregistered and exited 130"
  else
    fail "Ctrl-C: the peripheral exited $peripheral_rc: $(head -c 300 "$OUT/int-peripheral.err")"
  fi
  # The peripheral withdrew its advertisement itself (bluetoothd would also drop it when the
  # process's bus connection closes, but without an UnregisterAdvertisement call).
  instances=$(busctl --system get-property org.bluez /org/bluez/hci1 \
    org.bluez.LEAdvertisingManager1 ActiveInstances 2>/dev/null)
  if ((unregistered == 1)) && [[ $instances == "y 0" ]]; then
    ok "Ctrl-C: the peripheral called UnregisterAdvertisement; hci1 advertises nothing"
  else
    fail "Ctrl-C: $unregistered UnregisterAdvertisement calls; hci1's ActiveInstances '$instances'"
  fi
else
  fail "Ctrl-C: the central printed no value: $(head -c 300 "$OUT/int-central.err" | tr '\n' ' ')"
  kill -KILL "$central" "$peripheral" 2>/dev/null
  wait "$central" "$peripheral" 2>/dev/null
fi

# --- transfer: 20000 random bytes from hci1 to hci0 ----------------------------------------
wait_for 10 not_discovering
head -c 20000 /dev/urandom >"$OUT/transfer.msg"
start=$SECONDS
"$BIN/example-transfer" receive --adapter hci0 --timeout 60 \
  >"$OUT/transfer.out" 2>"$OUT/transfer-receive.err" &
receiver=$!
wait_discovering
"$BIN/example-transfer" send --adapter hci1 <"$OUT/transfer.msg" \
  >"$OUT/transfer-send.out" 2>"$OUT/transfer-send.err" &
sender=$!
wait "$receiver"
receive_rc=$?
took=$((SECONDS - start))
finish "$sender" 15
send_rc=$STATUS
if ((receive_rc == 0)) && cmp -s "$OUT/transfer.msg" "$OUT/transfer.out"; then
  ok "transfer: 20000 random bytes arrived byte-exact in ${took} s ($(tail -n 1 "$OUT/transfer-receive.err"))"
else
  fail "transfer: receive exit $receive_rc; $(head -c 300 "$OUT/transfer-receive.err" | tr '\n' ' ')" \
    "; $(cmp "$OUT/transfer.msg" "$OUT/transfer.out" 2>&1 | head -c 200)"
fi
if ((send_rc == 0)); then
  ok "transfer: send exited 0 after its one complete send"
else
  fail "transfer: send exit $send_rc; $(head -c 300 "$OUT/transfer-send.err" | tr '\n' ' ')"
fi

finish_suite
