#!/usr/bin/env bash
# Lab test of L2CAP LE connection-oriented channels (one host, hci0 the central, hci1 the
# peripheral): `blekit l2cap listen|connect` piping 1 MiB one way and 256 KiB the other (PSM from Apple's
# PSM characteristic and given with --psm), stdin EOF, a wrong or absent PSM, --secure, a link
# cut mid-stream; `advertise --l2cap` / `receive --l2cap` byte-exact, a sender killed mid-stream
# (exit 7, nothing printed), a peer without the PSM characteristic (exit 10), the channel's
# 16 KiB MTUs (receive --l2cap --json); and one throughput comparison of the same message over
# GATT notifications and over L2CAP. Runs inside the lab:
#
#   scripts/lab run -- Tests/Lab/l2cap.sh [BLEKIT]
#
# Each check prints "ok" or "FAIL"; the last line is "N passed, M failed"; the exit status is
# 1 if any failed. Inputs, outputs and errors are kept in $LAB_RESULTS/l2cap.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/l2cap
mkdir -p "$OUT"
PERIPHERAL=00:AA:01:01:00:01
HCI0_DEV=/org/bluez/hci0/dev_${PERIPHERAL//:/_}
# The pipes' outputs go to the guest's tmpfs first (copied to $OUT after): a consumer slower
# than the channel (9p) makes the kernel queue SDUs, and one run saw an SDU out of order then
# (docs/l2cap.md).
FAST=/tmp/l2cap-out
mkdir -p "$FAST"
# known: bluetoothd on hci0 knows the peripheral (receive --from connects without a scan).
known() {
  busctl --system introspect org.bluez "/org/bluez/hci0/dev_${PERIPHERAL//:/_}" >/dev/null 2>&1
}
first_line() { head -c 300 "$1" 2>/dev/null | tr '\n' ' '; }

head -c 1048576 /dev/urandom >"$OUT/1m.bin"
head -c 262144 /dev/urandom >"$OUT/256k.bin"
head -c 2097152 /dev/urandom >"$OUT/2m.bin"
seq 1 60000 | tr '\n' ' ' | head -c 262144 >"$OUT/256k.txt"

# listen NAME [ARGS...]: `l2cap listen` on hci1 in the background (stdin from $LISTEN_IN,
# default none), stdout/stderr in $OUT/NAME.listen.*; waits for its "PSM" line, sets LISTENER
# and PSM.
listen() {
  local name=$1
  shift
  "$BLEKIT" l2cap listen -a hci1 --timeout 90 "$@" <"${LISTEN_IN:-/dev/null}" \
    >"$FAST/$name.listen.out" 2>"$OUT/$name.listen.err" &
  LISTENER=$!
  wait_for 30 grep -q " PSM " "$OUT/$name.listen.err" || true
  PSM=$(sed -n 's/.* PSM \([0-9]*\).*/\1/p' "$OUT/$name.listen.err" | head -n 1)
}

# finish_listener: waits (bounded) for the listener to end by itself; sets LISTEN_RC.
# LISTEN_STUCK is set when it needed SIGTERM, and says so when even that did not end it within
# 40 s (blekit exits on its own 30 s after a signal): then it is killed.
finish_listener() {
  local n=300
  LISTEN_STUCK=
  while kill -0 "$LISTENER" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  if kill -0 "$LISTENER" 2>/dev/null; then
    LISTEN_STUCK="still running 30 s after the channel ended"
    kill -TERM "$LISTENER" 2>/dev/null
    n=400
    while kill -0 "$LISTENER" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
    if kill -0 "$LISTENER" 2>/dev/null; then
      LISTEN_STUCK="$LISTEN_STUCK, and 40 s after SIGTERM (killed)"
      kill -KILL "$LISTENER" 2>/dev/null
    fi
  fi
  wait "$LISTENER"
  LISTEN_RC=$?
  cp "$FAST"/*.out "$OUT"/ 2>/dev/null
}

# exchange NAME FILE: advertise FILE --once over L2CAP on hci1, receive --l2cap on hci0.
exchange() {
  local name=$1 file=$2
  local start=$SECONDS
  # The receiver first: when bluetoothd does not know the peripheral it scans, and the
  # advertisement must switch on under a running scan (docs/lab.md).
  "$BLEKIT" receive --l2cap -a hci0 --from "$PERIPHERAL" --timeout 60 ${RECEIVE_ARGS-} \
    >"$OUT/$name.out" 2>"$OUT/$name.err" &
  local recv=$!
  known || wait_discovering hci0 10
  # shellcheck disable=SC2086
  "$BLEKIT" advertise -a hci1 --l2cap --file "$file" --once --timeout 120 ${ADV_ARGS-} \
    >"$OUT/$name.adv.out" 2>"$OUT/$name.adv.err" &
  local adv=$!
  wait "$recv"
  RC=$?
  TOOK=$((SECONDS - start))
  local n=100
  while kill -0 "$adv" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  kill -TERM "$adv" 2>/dev/null
  wait "$adv"
  ADV_RC=$?
}

# --- absent PSM characteristic: a transfer peripheral without --l2cap ---------------------------
# First, while bluetoothd on hci0 has not yet cached a PSM characteristic of this peripheral:
# a later case could leave one behind that the peripheral removed just as a central connected
# (BlueZ 5.66 then keeps it while its cached hash matches; docs/l2cap.md), and the read of it
# fails with ATT error 0x01 (exit 8) instead of finding no characteristic. That race is
# bluetoothd's, covered by L2CAPPSMStaleHandleTests; this case checks the absent one.
# The connect first, its scan running before the advertising switches on (docs/lab.md: on
# Debian 13 the advertising started first was not seen within 30 s, run of 2026-12-06).
"$BLEKIT" l2cap connect -a hci0 --timeout 30 "$PERIPHERAL" </dev/null >"$OUT/absent.out" \
  2>"$OUT/absent.err" &
conn=$!
known || wait_discovering hci0 10
"$BLEKIT" advertise -a hci1 -m plain --timeout 60 >"$OUT/absent.adv.out" 2>&1 &
adv=$!
wait "$conn"
rc=$?
"$BLEKIT" receive --l2cap -a hci0 --from "$PERIPHERAL" --timeout 30 >"$OUT/absent.recv.out" \
  2>"$OUT/absent.recv.err"
rc2=$?
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
if ((rc == 10 && rc2 == 10)) && grep -q "no L2CAP PSM characteristic" "$OUT/absent.err" \
  && [[ ! -s $OUT/absent.recv.out ]]; then
  ok "no PSM characteristic: l2cap connect and receive --l2cap exit 10: $(first_line "$OUT/absent.err")"
else
  fail "absent PSM: connect exit $rc ($(first_line "$OUT/absent.err")); receive exit $rc2" \
    "($(first_line "$OUT/absent.recv.err"))"
fi
# The next case wants hci0 to find the peripheral by scanning, as it does when the peripheral is
# new: bluetoothd forgets it now, instead of 30 s after the link went down (its temporary
# device timeout).
wait_for 10 sh -c "! busctl --system get-property org.bluez '$HCI0_DEV' org.bluez.Device1 Connected | grep -q true"
busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o "$HCI0_DEV" \
  >"$OUT/absent.remove" 2>&1
forgotten() { ! known; }
wait_for 10 forgotten

# --- l2cap connect -> listen: 1 MiB, PSM read from the characteristic --------------------------
# The central's scan first (it finds the listener's advertisement), then the listener.
start=$SECONDS
"$BLEKIT" l2cap connect -a hci0 --timeout 60 "$PERIPHERAL" <"$OUT/1m.bin" \
  >"$FAST/up.connect.out" 2>"$OUT/up.connect.err" &
connector=$!
wait_discovering
listen up --receive-only
wait "$connector"
rc=$?
finish_listener
if ((rc == 0 && LISTEN_RC == 0)) && cmp -s "$OUT/1m.bin" "$OUT/up.listen.out"; then
  ok "connect -> listen: 1 MiB byte-exact, PSM $PSM from the characteristic ($((SECONDS - start)) s)"
elif ((rc == 0 && LISTEN_RC == 12)) && grep -q unverified "$OUT/up.listen.err"; then
  # The kernel's receive queue came near full (a late reader on this loaded emulator): the
  # output may be wrong and listen said so (docs/l2cap.md). Which of the two, is printed.
  ok "connect -> listen: listen exit 12, unverified (exact: $(cmp -s "$OUT/1m.bin" "$OUT/up.listen.out" && echo yes || echo no); $(first_line "$OUT/up.listen.err" | tail -c 160))"
else
  fail "connect -> listen: connect exit $rc ($(first_line "$OUT/up.connect.err")), listen exit" \
    "$LISTEN_RC ($(first_line "$OUT/up.listen.err")); $(cmp "$OUT/1m.bin" "$OUT/up.listen.out" 2>&1)"
fi

# --- listen -> connect: 256 KiB binary, --psm given (the kernel connects, no GATT) --------------
start=$SECONDS
LISTEN_IN=$OUT/256k.bin listen down --psm 201
"$BLEKIT" l2cap connect -a hci0 --timeout 60 --psm 201 --receive-only "$PERIPHERAL" \
  >"$FAST/down.connect.out" 2>"$OUT/down.connect.err"
rc=$?
finish_listener
if ((rc == 0 && LISTEN_RC == 0)) && [[ $PSM == 201 ]] && cmp -s "$OUT/256k.bin" "$OUT/down.connect.out"; then
  ok "listen --psm 201 -> connect --psm 201: 256 KiB byte-exact ($((SECONDS - start)) s)"
elif ((rc == 12 && LISTEN_RC == 0)) && [[ $PSM == 201 ]] && grep -q unverified "$OUT/down.connect.err"; then
  ok "listen --psm 201 -> connect --psm 201: connect exit 12, unverified (exact: $(cmp -s "$OUT/256k.bin" "$OUT/down.connect.out" && echo yes || echo no))"
else
  fail "listen -> connect: connect exit $rc ($(first_line "$OUT/down.connect.err")), listen exit" \
    "$LISTEN_RC ($(first_line "$OUT/down.listen.err")); PSM '$PSM'"
fi

# --- a consumer far behind: 2 MiB into a reader that sleeps first ------------------------------
# connect's standard output is a pipe to a process that reads nothing for 40 s, so the channel's
# buffer (1,024 SDUs) fills, reading pauses and the kernel's receive queue fills. The kernel may
# then reorder or drop SDUs (docs/l2cap.md), so the rule is: exit 0 with the exact bytes, or
# exit 12 (unverified) with one line that says why; never exit 0 with other bytes. (The pipes
# above follow the same rule.)
start=$SECONDS
LISTEN_IN=$OUT/2m.bin listen slow --psm 202
"$BLEKIT" l2cap connect -a hci0 --timeout 60 --psm 202 --receive-only "$PERIPHERAL" \
  2>"$OUT/slow.connect.err" | { sleep 40; cat >"$FAST/slow.connect.out"; }
rc=${PIPESTATUS[0]}
finish_listener
exact=no
cmp -s "$OUT/2m.bin" "$OUT/slow.connect.out" && exact=yes
if { ((rc == 0)) && [[ $exact == yes ]]; } \
  || { ((rc == 12)) && grep -q 'unverified' "$OUT/slow.connect.err"; }; then
  ok "slow consumer: exit $rc, exact: $exact ($(first_line "$OUT/slow.connect.err" | tail -c 200)) ($((SECONDS - start)) s)"
else
  fail "slow consumer: exit $rc, exact: $exact, listen exit $LISTEN_RC ($(first_line "$OUT/slow.connect.err")); $(cmp "$OUT/2m.bin" "$OUT/slow.connect.out" 2>&1)"
fi

# --- EOF at once: connect with empty stdin closes; listen prints nothing, both exit 0 ------------
listen eof --receive-only
"$BLEKIT" l2cap connect -a hci0 --timeout 30 "$PERIPHERAL" </dev/null \
  >"$FAST/eof.connect.out" 2>"$OUT/eof.connect.err"
rc=$?
finish_listener
if ((rc == 0 && LISTEN_RC == 0)) && [[ ! -s $OUT/eof.listen.out ]]; then
  ok "empty stdin: connect closes the channel at once; listen ends too, both exit 0"
else
  fail "empty stdin: connect exit $rc ($(first_line "$OUT/eof.connect.err")), listen exit $LISTEN_RC"
fi

# --- wrong PSM: nothing listens there (the link works: the listener advertises) ------------------
listen wrong --psm 202 --receive-only
"$BLEKIT" l2cap connect -a hci0 --timeout 30 --psm 203 "$PERIPHERAL" </dev/null \
  >"$OUT/wrong.out" 2>"$OUT/wrong.err"
rc=$?
kill -TERM "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
if ((rc == 10)) && grep -q "PSM 203" "$OUT/wrong.err" && [[ $(wc -l <"$OUT/wrong.err") == 1 ]]; then
  ok "connect --psm 203 where nothing listens: exit 10: $(first_line "$OUT/wrong.err")"
else
  fail "wrong PSM: exit $rc: $(first_line "$OUT/wrong.err")"
fi

# --- the link lost mid-stream: connect exits 7, no hang --------------------------------------
# The controller reports the link gone with reason 0x08 (connection timeout, what a real radio
# reports on a supervision timeout): hcitool asks hci0 to disconnect with that reason, and
# btvirt reports it back as given.
LISTEN_IN=$OUT/2m.bin listen cut
"$BLEKIT" l2cap connect -a hci0 --timeout 60 --receive-only "$PERIPHERAL" \
  >"$FAST/cut.connect.out" 2>"$OUT/cut.connect.err" &
connector=$!
wait_for 30 test -s "$FAST/cut.connect.out"
handle=$(hcitool -i hci0 con | sed -n "s/.*LE $PERIPHERAL handle \([0-9]*\).*/\1/p" | head -n 1)
hcitool -i hci0 ledc "${handle:-0}" 8 >"$OUT/cut.hcitool" 2>&1
start=$SECONDS
n=200
while kill -0 "$connector" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
kill -KILL "$connector" 2>/dev/null
wait "$connector"
rc=$?
finish_listener
got=$(stat -c %s "$OUT/cut.connect.out")
# The bytes before the cut are the file's first ones, or connect said they may be out of order
# (its receive queue came near full first: the kernel's reordering, docs/l2cap.md; seen once).
exact=no
cmp -s "$OUT/cut.connect.out" <(head -c "$got" "$OUT/2m.bin") && exact=yes
if ((rc == 7)) && ((got < 2097152)) && grep -q "was lost" "$OUT/cut.connect.err" \
  && { [[ $exact == yes ]] || grep -q "out of order" "$OUT/cut.connect.err"; }; then
  ok "link lost after $got bytes (in order: $exact): connect exits 7 within $((SECONDS - start)) s:" \
    "$(first_line "$OUT/cut.connect.err")"
else
  fail "link lost (handle '$handle'): connect exit $rc after $got bytes (in order: $exact): $(first_line "$OUT/cut.connect.err")"
fi
# The sender's side: 2 MiB of standard input did not all go out, so listen ends by itself with
# exit 7 (never 0, never a hang).
if ((LISTEN_RC == 7)) && [[ -z $LISTEN_STUCK ]]; then
  ok "link lost: listen, its input unsent, exits 7 by itself: $(tail -n 1 "$OUT/cut.listen.err")"
else
  fail "link lost: listen exit $LISTEN_RC${LISTEN_STUCK:+ ($LISTEN_STUCK)}: $(tail -n 1 "$OUT/cut.listen.err")"
fi

# --- --secure: channels only on an encrypted link --------------------------------------------
# Without an agent on hci1's side the kernel's own attempt to pair (it answers "insufficient
# encryption" by pairing and asking again) fails: exit 5, one line.
listen secure --secure --receive-only
echo "over an encrypted link" >"$OUT/secure.in"
"$BLEKIT" l2cap connect -a hci0 --timeout 20 --psm "${PSM:-0}" "$PERIPHERAL" <"$OUT/secure.in" \
  >"$OUT/secure.plain.out" 2>"$OUT/secure.plain.err"
rc=$?
kill -TERM "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
# Linux 6.12 (Debian 13) answers the failed pairing differently: the initiator's kernel drops the
# whole link (HCI Disconnect, reason Authentication Failure; btmon of 2026-12-06), so the
# connect ends with ECONNABORTED, which blekit reports as a lost link (exit 7). 6.1 keeps the
# link and refuses the channel for its security (exit 5).
if ((rc == 5)) && [[ ! -s $OUT/secure.listen.out ]] && grep -q "more security" "$OUT/secure.plain.err"; then
  ok "listen --secure, no agent to pair: connect exits 5: $(first_line "$OUT/secure.plain.err")"
elif [[ ${LAB_DEBIAN:-12} == 13 ]] && ((rc == 7)) && [[ ! -s $OUT/secure.listen.out ]] &&
  grep -q "connection abort" "$OUT/secure.plain.err"; then
  ok "listen --secure, no agent to pair (Linux 6.12 drops the link): connect exits 7: $(first_line "$OUT/secure.plain.err")"
else
  fail "listen --secure without pairing: connect exit $rc: $(first_line "$OUT/secure.plain.err")"
fi
# With blekit's agent on hci1 (advertise --pairable --confirm auto), receive --l2cap (which asks
# for no security itself) gets the message: the kernel pairs just-works and opens the channel.
ADV_ARGS="--secure --pairable --confirm auto" exchange secure "$OUT/secure.in"
rc=$RC
paired=$(prop /org/bluez/hci0/dev_${PERIPHERAL//:/_} org.bluez.Device1 Paired)
if ((rc == 0)) && cmp -s "$OUT/secure.in" "$OUT/secure.out" && [[ $paired == *true ]]; then
  ok "advertise --l2cap --secure --pairable: receive --l2cap paired (Paired=$paired) and got it byte-exact"
else
  fail "advertise --l2cap --secure: receive exit $rc ($(first_line "$OUT/secure.err")); Paired=$paired;" \
    "advertise exit $ADV_RC: $(first_line "$OUT/secure.adv.err")"
fi
"$BLEKIT" unpair -a hci0 "$PERIPHERAL" >/dev/null 2>&1
"$BLEKIT" unpair -a hci1 00:AA:01:00:00:00 >/dev/null 2>&1

# --- advertise --l2cap / receive --l2cap (256 KiB in the throughput run below) ------------------
: >"$OUT/empty.msg"
printf 'hello over L2CAP' >"$OUT/text.msg"
for name in empty text; do
  file=$OUT/$name
  [[ -e $file ]] || file=$OUT/$name.msg
  exchange "msg-$name" "$file"
  if ((RC == 0 && ADV_RC == 0)) && cmp -s "$file" "$OUT/msg-$name.out"; then
    ok "receive --l2cap: $(stat -c %s "$file") bytes byte-exact; advertise --once exit 0 (${TOOK} s)"
  else
    fail "receive --l2cap $name: exit $RC ($(first_line "$OUT/msg-$name.err")); advertise exit" \
      "$ADV_RC ($(first_line "$OUT/msg-$name.adv.err"))"
  fi
done

# --- the sender killed mid-stream: receive --l2cap exits 7 and prints nothing -------------------
# advertise runs on a terminal (script) so that it draws its progress line; it is killed once
# that shows bytes going out.
"$BLEKIT" receive --l2cap -a hci0 --from "$PERIPHERAL" --timeout 60 >"$OUT/kill.out" \
  2>"$OUT/kill.err" &
recv=$!
known || wait_discovering hci0 10
script -qfec "$BLEKIT advertise -a hci1 --l2cap --file $OUT/2m.bin --once --timeout 120" \
  "$OUT/kill.adv.tty" >/dev/null 2>&1 &
adv=$!
wait_for 60 grep -qs "sent [0-9]*/2097152" "$OUT/kill.adv.tty"
# SIGKILL to script: the pty closes and advertise gets SIGHUP, which ends it at once.
kill -KILL "$adv"
start=$SECONDS
n=300
while kill -0 "$recv" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
kill -KILL "$recv" 2>/dev/null
wait "$recv"
rc=$?
if ((rc == 7)) && [[ ! -s $OUT/kill.out ]] && grep -q "ended after [0-9]* of 2097152 bytes" "$OUT/kill.err"; then
  ok "sender killed mid-stream: receive --l2cap exit 7 within $((SECONDS - start)) s, nothing printed:" \
    "$(first_line "$OUT/kill.err")"
else
  # (Before the framing's window (version 2), a full receive queue could reorder SDUs and this
  # ended with exit 12, "the message is corrupt"; with at most 24 KiB in flight it must not.)
  fail "sender killed: receive exit $rc, $(stat -c %s "$OUT/kill.out") bytes printed: $(first_line "$OUT/kill.err")"
fi

# --- throughput: the same 256 KiB over GATT notifications and over L2CAP, in this run -----------
"$BLEKIT" receive -a hci0 --from "$PERIPHERAL" --timeout 60 --json >"$OUT/bench-gatt.json" \
  2>"$OUT/bench-gatt.err" &
recv=$!
known || wait_discovering hci0 10
"$BLEKIT" advertise -a hci1 --file "$OUT/256k.txt" --once --timeout 120 >/dev/null 2>&1 &
adv=$!
wait "$recv"
gatt_rc=$?
kill -TERM "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
gatt_rate=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["bytesPerSecond"]))' \
  "$OUT/bench-gatt.json" 2>/dev/null || echo 0)
RECEIVE_ARGS=--json exchange bench-l2cap "$OUT/256k.txt"
cp "$OUT/bench-l2cap.out" "$OUT/bench-l2cap.json"
l2cap_rate=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["bytesPerSecond"]))' \
  "$OUT/bench-l2cap.json" 2>/dev/null || echo 0)
same=$(/usr/bin/python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["message"]; b = json.load(open(sys.argv[2]))["message"]
print("yes" if a == b == open(sys.argv[3]).read() else "no")' "$OUT/bench-gatt.json" "$OUT/bench-l2cap.json" "$OUT/256k.txt" 2>/dev/null)
echo "# throughput, 256 KiB, transfer only: GATT notifications $gatt_rate B/s, L2CAP $l2cap_rate B/s"
if ((gatt_rc == 0 && RC == 0)) && [[ $same == yes ]]; then
  ok "throughput measured: GATT $gatt_rate B/s, L2CAP $l2cap_rate B/s (see docs/lab.md)"
else
  fail "throughput run: GATT exit $gatt_rc ($(first_line "$OUT/bench-gatt.err")), L2CAP exit $RC"
fi

# The channel's MTUs: blekit asks for a 16 KiB receive MTU on both ends (the kernel's default
# is 672), so the peer may send larger SDUs and is granted credits for more PDUs at a time.
mtus=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["sendMTU"], d["receiveMTU"])' \
  "$OUT/bench-l2cap.json" 2>/dev/null)
if [[ $mtus == "16384 16384" ]]; then
  ok "receive --l2cap --json: the channel's MTUs are 16384 out and 16384 in"
else
  fail "receive --l2cap --json: MTUs out and in '${mtus:-none}', want 16384 16384"
fi

echo "l2cap: $passed passed, $failed failed"
finish_suite
