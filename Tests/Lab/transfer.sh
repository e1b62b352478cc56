#!/usr/bin/env bash
# Lab test of the transfer between two blekit ends on one host with stock bluetoothd (EATT on):
# `blekit advertise --once` on hci1, `blekit receive` on hci0, for every message shape issue 6
# names; the reply path; the refusal of a caller other than bluetoothd; and bad input. Runs
# inside the lab:
#
#   scripts/lab run -- Tests/Lab/transfer.sh [BLEKIT]
#
# BLEKIT defaults to $BLEKIT or .build/debug/blekit. Each check prints "ok" or "FAIL"; the last
# line is "N passed, M failed"; the exit status is 1 if any failed. Messages, outputs and
# errors are kept in $LAB_RESULTS/transfer.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/transfer
mkdir -p "$OUT"

# exchange NAME FILE [RECEIVE-ARGS...]: advertise FILE once on hci1 (with $ADV_ARGS), receive
# it on hci0 into $OUT/NAME.out (stdout, a file). Sets RC (receive's status) and TOOK.
exchange() {
  local name=$1 file=$2
  shift 2
  # The scanner first, then the advertisement (see wait_discovering).
  local start=$SECONDS
  "$BLEKIT" receive -a hci0 --timeout 60 "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  local recv=$!
  wait_discovering
  # shellcheck disable=SC2086
  "$BLEKIT" advertise -a hci1 --file "$file" --once --timeout 120 ${ADV_ARGS-} \
    >"$OUT/$name.adv.out" 2>"$OUT/$name.adv.err" &
  local adv=$!
  wait "$recv"
  RC=$?
  TOOK=$((SECONDS - start))
  # advertise --once exits after the send; give it a bounded while, then stop it. A receive
  # that failed (a refusal before subscribing among them) left nothing to send: stop it now
  # (waiting cost 20 s a run in the lab, 10 runs of the plain peer's refusal).
  local n=100
  ((RC == 0)) || n=0
  while kill -0 "$adv" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  kill -TERM "$adv" 2>/dev/null
  wait "$adv" 2>/dev/null
  ADV_RC=$?
}

# transfer NAME FILE [RECEIVE-ARGS...]: exchange, then check that stdout (a file) holds exactly
# the message bytes, nothing added.
transfer() {
  local name=$1 file=$2
  exchange "$@"
  if ((RC == 0)) && cmp -s "$file" "$OUT/$name.out"; then
    ok "$name: $(stat -c %s "$file") bytes arrived byte-exact (${TOOK} s)"
  else
    fail "$name: receive exit $RC; $(head -c 300 "$OUT/$name.err" | tr '\n' ' ')" \
      "; $(cmp "$file" "$OUT/$name.out" 2>&1 | head -c 200)"
  fi
}

# --- message shapes (stock bluetoothd: EATT may reorder; blekit's framing must not care) ----
msg() { printf '%s' "$2" >"$OUT/$1.msg"; }
: >"$OUT/empty.msg"
msg one-byte "x"
head -c 508 /dev/zero | tr '\0' 'a' >"$OUT/one-frame.msg"             # a sequenced frame's body
head -c 512 /dev/zero | tr '\0' 'b' >"$OUT/one-plain-chunk.msg"       # a plain chunk at MTU 517
head -c $((3 * 508 + 1)) /dev/zero | tr '\0' 'c' >"$OUT/three-chunks-plus-one.msg"
# 64 KiB and 256 KiB of printable text that differs everywhere (so a reordering would show).
seq 1 100000 | tr '\n' ' ' | head -c 65536 >"$OUT/64k.msg"
seq 1 300000 | tr '\n' ' ' | head -c 262144 >"$OUT/256k.msg"
# 3-byte characters straddle every 508- and 512-byte boundary.
for _ in $(seq 1 700); do printf '€'; done >"$OUT/utf8-straddle.msg"
msg eom "EOM"
msg contains-eom "before EOM after EOM EOM"

for name in empty one-byte one-frame one-plain-chunk three-chunks-plus-one utf8-straddle eom \
  contains-eom 64k 256k; do
  transfer "$name" "$OUT/$name.msg"
done

# --- reply: receive --reply X makes advertise print X -----------------------------------
msg reply-message "ping"
transfer reply "$OUT/reply-message.msg" --reply "pong from hci0"
if grep -qx "pong from hci0" "$OUT/reply.adv.out"; then
  ok "reply: advertise printed the central's reply"
else
  fail "reply: advertise printed: $(head -c 200 "$OUT/reply.adv.out" "$OUT/reply.adv.err" | tr '\n' ' ')"
fi

# --- JSON output -------------------------------------------------------------------------
msg json-message "json body"
"$BLEKIT" receive -a hci0 --timeout 60 --json >"$OUT/json.out" 2>"$OUT/json.err" &
recv=$!
wait_discovering
"$BLEKIT" advertise -a hci1 --file "$OUT/json-message.msg" --once --timeout 60 \
  >"$OUT/json.adv.out" 2>&1 &
adv=$!
wait "$recv"
rc=$?
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
if ((rc == 0)) && /usr/bin/python3 -c '
import json, sys
record = json.loads(open(sys.argv[1]).read())
assert "json body" in json.dumps(record), record
' "$OUT/json.out"; then
  ok "receive --json prints a JSON object carrying the message"
else
  fail "receive --json: exit $rc: $(head -c 300 "$OUT/json.out" "$OUT/json.err" | tr '\n' ' ')"
fi

# --- security: a caller other than bluetoothd is refused -----------------------------------
"$BLEKIT" advertise -a hci1 --message secret --timeout 60 >"$OUT/security.adv.out" 2>&1 &
adv=$!
sleep 2
refused=no
accepted=no
# Every unique name on the bus gets the call (only advertise exports the path); busctl builds
# the a{sv} argument that dbus-send cannot.
for name in $(busctl --system --no-legend list --unique 2>/dev/null | awk '{print $1}'); do
  for char in /org/blekit/app0/service0/char0 /org/blekit/app0/service0/char1; do
    reply=$(busctl --system call "$name" "$char" org.bluez.GattCharacteristic1 WriteValue \
      'aya{sv}' 2 65 66 0 2>&1)
    status=$?
    if grep -q "NotAuthorized\|only bluetoothd" <<<"$reply"; then
      refused=yes
    elif ((status == 0)); then
      accepted=yes
    fi
    reply=$(busctl --system call "$name" "$char" org.bluez.GattCharacteristic1 StartNotify 2>&1)
    (($? == 0)) && accepted=yes
  done
done
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
if [[ $refused == yes && $accepted == no ]]; then
  ok "security: another client's WriteValue on the exported characteristic gets NotAuthorized"
else
  fail "security: refused=$refused accepted=$accepted"
fi
if grep -q "AB" "$OUT/security.adv.out"; then
  fail "security: advertise printed a write from a stranger"
else
  ok "security: nothing from the stranger reached the output"
fi

# --- a message is bytes: binary files, JSON in base64 ------------------------------------
head -c 20000 /dev/urandom >"$OUT/binary.msg"
printf 'NUL\0and \377 bytes' >"$OUT/nul-and-ff.msg"
transfer binary "$OUT/binary.msg"
transfer nul-and-ff "$OUT/nul-and-ff.msg"
exchange json-binary "$OUT/binary.msg" --json
if ((RC == 0)) && /usr/bin/python3 -c '
import base64, json, sys
record = json.loads(open(sys.argv[1]).read())
assert record["encoding"] == "base64" and record["order"] == "sequenced", record
assert base64.b64decode(record["message"]) == open(sys.argv[2], "rb").read()
' "$OUT/json-binary.out" "$OUT/binary.msg"; then
  ok "receive --json: a binary message comes in base64 (encoding base64, order sequenced) and decodes exactly"
else
  fail "receive --json binary: exit $RC: $(head -c 300 "$OUT/json-binary.err")"
fi

# --- standard output that fails: a full disk, a closed pipe --------------------------------
msg output-message "goes nowhere"
# Standard output on /dev/full (ENOSPC).
"$BLEKIT" receive -a hci0 --timeout 60 >/dev/full 2>"$OUT/full.err" &
recv=$!
wait_discovering
"$BLEKIT" advertise -a hci1 --file "$OUT/output-message.msg" --once --timeout 60 >/dev/null 2>&1 &
adv=$!
wait "$recv"
rc=$?
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
if ((rc == 13)) && grep -q "cannot write to standard output" "$OUT/full.err"; then
  ok "receive >/dev/full: exit 13: $(head -n1 "$OUT/full.err")"
else
  fail "receive >/dev/full: exit $rc (want 13): $(head -c 300 "$OUT/full.err")"
fi
# A reader that is gone before the message comes: EPIPE, not a silent SIGPIPE death.
( "$BLEKIT" receive -a hci0 --timeout 60 2>"$OUT/pipe.err" | true
  echo "${PIPESTATUS[0]}" >"$OUT/pipe.rc" ) &
recv=$!
wait_discovering
"$BLEKIT" advertise -a hci1 --file "$OUT/output-message.msg" --once --timeout 60 >/dev/null 2>&1 &
adv=$!
wait "$recv"
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
rc=$(cat "$OUT/pipe.rc" 2>/dev/null)
if [[ $rc == 13 ]] && grep -q "Broken pipe" "$OUT/pipe.err"; then
  ok "receive | (closed pipe): exit 13: $(head -n1 "$OUT/pipe.err")"
else
  fail "receive | (closed pipe): exit ${rc:-?} (want 13): $(head -c 300 "$OUT/pipe.err")"
fi

# --- a plain peer (advertise --plain-only: the sample's characteristic alone) ---------------
seq 1 30000 | tr '\n' ' ' | head -c 65536 >"$OUT/plain.msg"
cp /run/lab/state "$OUT/lab-state.orig"
if [[ ${LAB_DEBIAN:-12} == 13 ]]; then
  # Stock bluetoothd 5.82 defaults to [GATT] Channels = 1 (src/main.c, since 5.67): one ATT
  # bearer, so receive prints a plain peer's message without --accept-unordered.
  exact=0
  for i in 1 2 3; do
    ADV_ARGS=--plain-only exchange "plain-stock-$i" "$OUT/plain.msg"
    if ((RC == 0)) && cmp -s "$OUT/plain.msg" "$OUT/plain-stock-$i.out"; then
      exact=$((exact + 1))
    else
      echo "# plain-stock-$i: exit $RC: $(head -c 300 "$OUT/plain-stock-$i.err")"
    fi
  done
  if ((exact == 3)); then
    ok "plain peer, stock bluetoothd 5.82 (Channels defaults to 1): 3 of 3 exact with exit 0, no --accept-unordered"
  else
    fail "plain peer, stock bluetoothd 5.82: $exact of 3 exact with exit 0"
  fi
  # The EATT refusal below is Debian 12's (stock 5.66). With Channels = 3, bluetoothd 5.82 on
  # Linux 6.12 under btvirt lost every link ("Software caused connection abort" in its log,
  # 4 of 4 runs on 2026-12-06), so it cannot be exercised here.
  echo "# Debian 13: the EATT refusal (exit 12) is checked on Debian 12, whose stock bluetoothd runs EATT"
else
# Stock bluetoothd 5.66 runs EATT ([GATT] Channels = 3) and blekit's peripheral side offers it
# (Server Supported Features 0x01): plain chunks may be reordered, so receive must refuse
# (exit 12) before subscribing, every time, unless --accept-unordered. A run that printed
# anything with exit 0 must be byte-exact.
wrong=0
refused=0
exact=0
for i in $(seq 1 10); do
  ADV_ARGS=--plain-only exchange "plain-$i" "$OUT/plain.msg"
  if ((RC == 0)); then
    if cmp -s "$OUT/plain.msg" "$OUT/plain-$i.out"; then exact=$((exact + 1)); else wrong=$((wrong + 1)); fi
  elif ((RC == 12)) && [[ ! -s $OUT/plain-$i.out ]]; then
    refused=$((refused + 1))
  else
    echo "# plain-$i: exit $RC: $(head -c 300 "$OUT/plain-$i.err")"
  fi
done
echo "# plain peer, bluetoothd on EATT, 10 runs: $refused refused (exit 12), $exact exact, $wrong wrong with exit 0"
if ((wrong == 0 && refused == 10)); then
  ok "plain peer over EATT: 10 of 10 refused with exit 12, nothing printed; 0 wrong messages with exit 0"
else
  fail "plain peer over EATT: $refused refused, $exact exact, $wrong WRONG with exit 0 (of 10)"
fi
if grep -q "Channels = 1" "$OUT/plain-1.err" && grep -q -- "--accept-unordered" "$OUT/plain-1.err" \
  && (($(wc -l <"$OUT/plain-1.err") == 1)); then
  ok "plain refusal: one line naming the fix: $(cat "$OUT/plain-1.err")"
else
  fail "plain refusal message: $(head -c 400 "$OUT/plain-1.err")"
fi
# Over EATT the EOM itself can overtake a chunk, which is then lost: the receiver printed the
# message's chunks, perhaps not all, and said it may be wrong (what --accept-unordered accepts).
ADV_ARGS=--plain-only exchange plain-accepted "$OUT/plain.msg" --accept-unordered
if ((RC == 0)) && grep -q "the message may be wrong" "$OUT/plain-accepted.err" \
  && some_chunks "$OUT/plain.msg" "$OUT/plain-accepted.out"; then
  if cmp -s "$OUT/plain.msg" "$OUT/plain-accepted.out"; then
    order="whole and in order this time"
  elif same_chunks "$OUT/plain.msg" "$OUT/plain-accepted.out"; then
    order="every chunk, REORDERED, as EATT allows"
  else
    order="$(stat -c %s "$OUT/plain-accepted.out") of $(stat -c %s "$OUT/plain.msg") bytes: a chunk came after EOM, as EATT allows"
  fi
  ok "--accept-unordered: exit 0, a warning on stderr, only the message's chunks ($order)"
else
  fail "--accept-unordered: exit $RC: $(head -c 300 "$OUT/plain-accepted.err")"
fi
fi

# The same peer with bluetoothd on one ATT bearer (Channels = 1, bluetoothd restarted through
# the lab's state file): the order is guaranteed, receive prints the exact bytes.
printf '[GATT]\nChannels = 1\n' >"$OUT/main-channels1.conf"
sed -i "s|^LAB_BLUETOOTHD_CONF=.*|LAB_BLUETOOTHD_CONF=$OUT/main-channels1.conf|" /run/lab/state
lab-bluetoothd restart >/dev/null 2>&1 || echo "# lab-bluetoothd restart (Channels = 1) failed"
for i in 1 2 3; do
  ADV_ARGS=--plain-only transfer "plain-channels1-$i" "$OUT/plain.msg"
done
ADV_ARGS=--plain-only exchange plain-channels1-json "$OUT/plain.msg" --json
if ((RC == 0)) && /usr/bin/python3 -c '
import json, sys
record = json.loads(open(sys.argv[1]).read())
assert record["framing"] == "plain" and record["order"] == "guaranteed", record
assert "Channels = 1" in record["orderReason"], record
assert record["encoding"] == "utf-8" and record["message"] == open(sys.argv[2]).read()
' "$OUT/plain-channels1-json.out" "$OUT/plain.msg"; then
  ok "plain peer, Channels = 1: --json says order guaranteed ($(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["orderReason"])' "$OUT/plain-channels1-json.out"))"
else
  fail "plain peer, Channels = 1, --json: exit $RC: $(head -c 300 "$OUT/plain-channels1-json.out" "$OUT/plain-channels1-json.err")"
fi
cp "$OUT/lab-state.orig" /run/lab/state
lab-bluetoothd restart >/dev/null 2>&1 || echo "# lab-bluetoothd restart (stock) failed"

# --- bad input: one line on stderr, a distinct status ---------------------------------------
# expect NAME STATUS ARGS...
expect() {
  local name=$1 want=$2
  shift 2
  timeout 60 "$BLEKIT" "$@" >"$OUT/bad-$name.out" 2>"$OUT/bad-$name.err"
  local rc=$? lines
  lines=$(wc -l <"$OUT/bad-$name.err")
  if ((rc == want && lines == 1 || rc == want && lines == 2)); then
    ok "bad input $name: exit $rc: $(head -n1 "$OUT/bad-$name.err")"
  else
    fail "bad input $name: exit $rc (want $want), $lines lines: $(head -c 300 "$OUT/bad-$name.err")"
  fi
}
expect malformed-uuid 2 scan --service E20A39F4-XXXX --timeout 2
expect rssi-out-of-range 2 receive --min-rssi -300
expect count-without-separator 2 receive --count 2 --timeout 5
head -c $((17 << 20)) /dev/zero >"$OUT/17m.msg"
expect file-over-16mib 2 advertise -a hci1 --file "$OUT/17m.msg"
expect endless-file 2 advertise -a hci1 --file /dev/zero
rm -f "$OUT/17m.msg"
expect unknown-adapter 3 receive --adapter hci9 --timeout 5
# flags 3 + the 128-bit service UUID 18 + manufacturer data 22 = 43 > 31 (said before bluetoothd is asked)
expect too-large 9 advertise -a hci1 --message x \
  --manufacturer 0xFFFF:02100102030405060708090a0b0c0d0e0f10
lab-bluetoothd stop >/dev/null 2>&1
expect bluetoothd-absent 4 receive --timeout 5
lab-bluetoothd start >/dev/null 2>&1

finish_suite
