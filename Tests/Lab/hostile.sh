#!/usr/bin/env bash
# Hostile peers in the Bumble air (issue 17): blekit against peers that misbehave, and two
# centrals receiving from one `advertise` at once. Runs inside the lab:
#
#   scripts/lab run --controllers 0 --bumble 3 --env BLEKIT=$PWD/.build/debug/blekit \
#     --timeout 420 -- Tests/Lab/hostile.sh
#
# hci0, hci1 and hci2 are Bumble controllers managed by the lab's bluetoothd; the hostile peer
# is one Tests/Lab/bumble-peer.py process (`hostile --control FILE`, Python starts slowly under
# emulation) on a controller of its own in the same air, told each case through FILE. Every blekit command runs under a watchdog (a hang fails its check). For every
# case the rule is the same: exit 0 with the exact message, or a non-zero exit with one line on
# standard error and nothing on standard output; never a wrong message with status 0. Cases:
#   1. two centrals (hci0, hci2) receive from one `advertise` (hci1) at the same time (and, in
#      5, from one Bumble peripheral);
#   2. notification floods (the message exact, or refused with exit 12 when the kernel or
#      bluetoothd may have dropped chunks): thousands of 20-byte chunks at MTU 23 with chunks after the EOM,
#      512-byte chunks at MTU 517, chunks of 514 bytes (legal at MTU 517, over ATT's 512-byte
#      value limit), chunks longer than the MTU allows (a known limit of the plain protocol,
#      pinned down), and a message that never ends (no EOM: receive's memory stays bounded and
#      it ends with a cut, exit 7);
#   3. a peer that drops the link as soon as it is up, one that drops it at the first service
#      discovery request, and one that answers discovery with a malformed response;
#   4. a flood of connections against `advertise`, which then still serves a receive;
#   5. two centrals receive from one Bumble peripheral at once;
#   6. a central that never confirms an indication (`serve` reports it and goes on serving);
#   7. two centrals on one `serve` at once: its connection and subscription events.
# bluetoothd dies in some of these (a link dropped during its MTU exchange, a connection
# attempt that timed out; a kernel oops each time in the runs of docs/lab.md); the suite says
# so and starts it again.
# Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/hostile
mkdir -p "$OUT"
export PYTHONPATH=${LAB_PYLIB:-$PWD/.build-lab/pylib}
PEER_ADDRESS=C0:FF:EE:00:10:01
CONTROL=$OUT/control

HCI1=$(address_of hci1)

# forget_peer: removes the peer from hci0's bluetoothd (and its GATT cache), so the next
# receive finds it anew and discovers its services again.
forget_peer() {
  busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o \
    "/org/bluez/hci0/dev_${PEER_ADDRESS//:/_}" >/dev/null 2>&1
}
# set_case LINE: what the hostile peer does from its next connection on (bumble-peer.py).
set_case() { echo "$*" >>"$CONTROL"; }
peer_says() { grep -v '^ready' "$OUT/peer.log" | tail -n +"$1" | head -4 | tr '\n' ' '; }
# bluetoothd_survived NAME: whether bluetoothd still runs after case NAME; if not (not
# blekit's doing: it died when a link dropped during its own MTU exchange, and when a second
# connection attempt timed out; in the 2026-12-04 runs each death was a kernel oops in the
# Bluetooth stack, list corruption in hci_chan_del under l2cap_sock_release, that killed
# bluetoothd inside close()), says which it was, counts it, starts it again, returns 1.
BLUETOOTHD_DEATHS=()
OOPSES_SEEN=$(dmesg | grep -c 'Oops\|BUG\|general protection fault')
bluetoothd_survived() {
  lab-bluetoothd status >/dev/null 2>&1 && return
  local oopses how="bluetoothd's own crash: see bluetoothd.log"
  oopses=$(dmesg | grep -c 'Oops\|BUG\|general protection fault')
  ((oopses > OOPSES_SEEN)) && how="a kernel oops in the Bluetooth stack: see dmesg.log"
  OOPSES_SEEN=$oopses
  echo "# bluetoothd died during '$1' ($how); starting it again"
  BLUETOOTHD_DEATHS+=("$1")
  lab-bluetoothd start >>"$OUT/bluetoothd-restarts.log" 2>&1
  return 1
}

# bounded NAME LIMIT COMMAND...: runs COMMAND (stdout $OUT/NAME.out, stderr $OUT/NAME.err) and
# waits at most LIMIT seconds; sets RC (255: it hung and was killed), TOOK (seconds) and
# PEAK_KB (its peak resident memory, VmHWM, polled every 0.2 s), also written to
# $OUT/NAME.status for a caller that ran it in the background (see load).
bounded() {
  local name=$1 limit=$2 pid start=$SECONDS hwm
  shift 2
  "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  pid=$!
  PEAK_KB=0
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < limit)); do
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    ((${hwm:-0} > PEAK_KB)) && PEAK_KB=$hwm
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    sleep 2
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    RC=255
  else
    wait "$pid"
    RC=$?
  fi
  TOOK=$((SECONDS - start))
  echo "$RC $TOOK $PEAK_KB" >"$OUT/$name.status"
}
load() { read -r RC TOOK PEAK_KB <"$OUT/$1.status"; }

# outcome NAME EXPECTED: the rule of every case. Exit 0 with stdout equal to EXPECTED (a file)
# and nothing on stderr; or a non-zero exit (not a hang, not a crash) with one line on stderr
# and nothing on stdout. Prints what happened.
outcome() {
  local name=$1 expected=$2
  echo "# $name: exit $RC after ${TOOK} s, peak RSS ${PEAK_KB} kB, stdout $(wc -c <"$OUT/$name.out") bytes, stderr: $(head -c 300 "$OUT/$name.err" | tr '\n' ' ')"
  if ((RC == 0)); then
    cmp -s "$expected" "$OUT/$name.out" && [[ ! -s $OUT/$name.err ]]
  else
    ((RC != 255 && RC < 128)) && [[ ! -s $OUT/$name.out ]] \
      && [[ $(wc -l <"$OUT/$name.err") == 1 ]] && grep -q '^blekit: ' "$OUT/$name.err"
  fi
}

# receive_from NAME ADDRESS [ARGS...]: one bounded receive on hci0 (120 s; it gives up finding
# and connecting after 20 s).
receive_from() {
  local name=$1 address=$2
  shift 2
  bounded "$name" 120 "$BLEKIT" receive -a hci0 --from "$address" --timeout 20 "$@"
}

/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 31 + 7) % 256 for i in range(8192)))' >"$OUT/8k.msg"
for i in $(seq 1 3000); do printf 'chunk %04d ..\n' "$i"; done | head -c 40000 >"$OUT/40k.msg"
head -c 262144 /dev/urandom >"$OUT/256k.msg"
head -c 51400 /dev/urandom >"$OUT/514.msg"
head -c 6000 /dev/urandom >"$OUT/600.msg"
/usr/bin/python3 -c 'import sys; d = open(sys.argv[1], "rb").read()
sys.stdout.buffer.write(b"".join(d[i:i + 244] for i in range(0, len(d), 600)))' "$OUT/600.msg" \
  >"$OUT/600.cut"
head -c 524288 /dev/urandom >"$OUT/512k.msg"
started=$SECONDS

# The hostile peer starts now and is ready by section 2.
set_case chunks --message "$OUT/8k.msg"
/usr/bin/python3 Tests/Lab/bumble-peer.py hostile --control "$CONTROL" --address "$PEER_ADDRESS" \
  >"$OUT/peer.log" 2>&1 &
peer=$!

# --- 1. two centrals receive from one advertise at once ------------------------------------
"$BLEKIT" advertise -a hci1 --file "$OUT/8k.msg" >"$OUT/adv-two.out" 2>"$OUT/adv-two.err" &
adv=$!
sleep 3
bounded two-a 90 "$BLEKIT" receive -a hci0 --from "$HCI1" --timeout 20 &
a=$!
bounded two-b 90 "$BLEKIT" receive -a hci2 --from "$HCI1" --timeout 20 &
b=$!
wait "$a" "$b"
for side in a b; do
  load "two-$side"
  exact=no
  cmp -s "$OUT/8k.msg" "$OUT/two-$side.out" && exact=yes
  check "two centrals, central $side: the exact message or a clear error (exact: $exact)" \
    outcome "two-$side" "$OUT/8k.msg"
done
check "two centrals: advertise still running" kill -0 "$adv"
kill "$adv" 2>/dev/null
wait "$adv" 2>/dev/null
echo "# section 1 took $((SECONDS - started)) s"
wait_for 90 grep -q '^ready' "$OUT/peer.log" || echo "# the hostile peer was not ready after 90 s"

# --- 2. notification floods ----------------------------------------------------------------
# chunks_case NAME FILE EXPECT PEER-ARGS...: the peer sends FILE in raw notifications
# (PEER-ARGS: --chunk, --mtu, --after, --no-eom); EXPECT is "exact" (exit 0, byte-exact),
# "exact-or-lost" (exit 0 byte-exact, or exit 12 saying chunks may have been lost: a flood can
# fill bluetoothd's ATT socket, where the kernel drops PDUs, or the AcquireNotify socket, where
# bluetoothd drops values; or exit 7 when the EOM itself was dropped), "cut" (exit 7, saying
# how many bytes arrived) or "rule" (the general rule only).
chunks_case() {
  local name=$1 file=$2 expect=$3 from
  shift 3
  from=$(($(grep -vc '^ready' "$OUT/peer.log") + 1))
  set_case chunks --message "$file" "$@"
  forget_peer
  receive_from "$name" "$PEER_ADDRESS"
  [[ $expect == known ]] ||
    check "$name: the exact message or a clear error, no hang" outcome "$name" "$file"
  case $expect in
    exact) check "$name: exit 0, byte-exact (exit $RC)" \
      bash -c "(($RC == 0)) && cmp -s '$file' '$OUT/$name.out'" ;;
    exact-or-lost)
      check "$name: exit 0 byte-exact, exit 12 saying chunks may have been lost, or exit 7 (exit $RC)" \
        bash -c "(($RC == 0)) && cmp -s '$file' '$OUT/$name.out' ||
          { (($RC == 12)) && grep -q 'may have been lost' '$OUT/$name.err'; } ||
          { (($RC == 7)) && grep -qE 'after [1-9][0-9]* bytes' '$OUT/$name.err'; }" ;;
    known) check "$name: known limit: exit 0 with the first 244 bytes (MTU-3) of each value (exit $RC)" \
      bash -c "(($RC == 0)) && cmp -s '$OUT/$name.out' '$OUT/600.cut'" ;;
    cut) check "$name: exit 7, a cut that says how many bytes arrived (exit $RC)" \
      bash -c "(($RC == 7)) && grep -qE 'after [1-9][0-9]* bytes' '$OUT/$name.err'" ;;
  esac
  echo "# peer: $(peer_says "$from")"
  bluetoothd_survived "$name"
}
# At MTU 23 the flood fills bluetoothd's ATT socket in the kernel, which then drops PDUs that no
# client sees; receive samples the kernel's L2CAP queues (/proc/net/l2cap) and refuses the
# message (exit 12) once one was seen half full, or reports a cut (exit 7) when the EOM was
# among the dropped.
chunks_case mtu23-flood "$OUT/40k.msg" exact-or-lost --mtu 23 --after 300
chunks_case values-512 "$OUT/256k.msg" exact-or-lost --mtu 517 --after 20
chunks_case values-514 "$OUT/514.msg" rule --mtu 517 --chunk 514
# Values longer than the MTU allows: bluetoothd reads the ATT PDU into an MTU-sized buffer and
# hands on MTU-3 bytes of each, saying nothing; the plain protocol has no length or checksum,
# so receive cannot tell (a known limit: blekit's sequenced framing checks length and CRC).
# The check pins that behaviour down, so a change in it is seen.
chunks_case over-mtu "$OUT/600.msg" known --mtu 247 --chunk 600
chunks_case no-eom "$OUT/512k.msg" cut --mtu 517 --no-eom
check "no-eom: receive's peak memory stays under 64 MiB for a 512 KiB message that never ends (${PEAK_KB} kB)" \
  test "$PEAK_KB" -lt 65536
echo "# section 2 took $((SECONDS - started)) s in all"

# --- 3. links dropped during connect and discovery, a malformed discovery response ----------
failed_clearly() { ((RC != 0)) && outcome "$1" /dev/null; }
# link_case NAME KIND: the peer misbehaves; receive must end with a clear error.
link_case() {
  local name=$1 kind=$2 from
  from=$(($(grep -vc '^ready' "$OUT/peer.log") + 1))
  set_case "$kind"
  forget_peer
  receive_from "$name" "$PEER_ADDRESS"
  check "$name: a clear error (a non-zero exit, one line), no hang" failed_clearly "$name"
  echo "# peer: $(peer_says "$from")"
  bluetoothd_survived "$name"
}
link_case drop-at-connect disconnect-at-connect
link_case drop-at-discovery disconnect-at-discovery
link_case malformed-discovery malformed-discovery
echo "# section 3 took $((SECONDS - started)) s in all"

# --- 4. a flood of connections against advertise -------------------------------------------
"$BLEKIT" advertise -a hci1 --message "still serving" >"$OUT/adv-flood.out" 2>"$OUT/adv-flood.err" &
adv=$!
sleep 3
# One receive first: what a process opens once on first use (libdispatch makes a timer
# descriptor per clock the first time one is armed: advertise arms one when a central's link
# makes it register its advertisement again) is not a leak; growth over the flood would be.
printf 'still serving' >"$OUT/still.msg"
receive_from before-flood "$HCI1"
check "connect flood: a receive before it gets the message (exit $RC)" \
  bash -c "(($RC == 0)) && cmp -s '$OUT/still.msg' '$OUT/before-flood.out'"
sleep 1
fds_before=$(ls "/proc/$adv/fd" | wc -l)
from=$(($(grep -vc '^ready' "$OUT/peer.log") + 1))
set_case connect-flood --target "$HCI1" --count 20 --timeout 5
wait_for 150 grep -q '^connects ' "$OUT/peer.log" || echo "# the connect flood did not end in 150 s"
echo "# peer: $(peer_says "$from")"
connects=$(sed -n 's/^connects \([0-9]*\)\/.*/\1/p' "$OUT/peer.log" | tail -n 1)
check "connect flood: the peer connected and dropped the link ${connects:-0} times of 20" \
  test "${connects:-0}" -gt 0
check "connect flood: advertise still running" kill -0 "$adv"
if bluetoothd_survived "connect flood"; then
  receive_from after-flood "$HCI1"
  check "connect flood: a receive afterwards gets the message (exit $RC)" \
    bash -c "(($RC == 0)) && cmp -s '$OUT/still.msg' '$OUT/after-flood.out'"
  sleep 1
  fds_after=$(ls "/proc/$adv/fd" | wc -l)
  check "connect flood: advertise's fd count did not grow ($fds_before -> $fds_after)" \
    test "$fds_after" -le "$fds_before"
else
  # The stack under advertise went away and came back: what is left to check is that
  # advertise survived that (it did, above) and still ends cleanly (below).
  echo "# not checked after the flood: a receive and advertise's fd count (bluetoothd died)"
fi
kill "$adv" 2>/dev/null
wait "$adv"
status=$?
check "connect flood: advertise exits 143 on SIGTERM (exit $status)" test "$status" == 143
# --- 5. two centrals receive from one Bumble peripheral at once --------------------------------
# Its centrals' bluetoothd is not also its own, so the race of section 1 (docs/lab.md, "bleak
# and two adapters in one bluetoothd") cannot happen. Last: seen twice, the second central's
# connection attempt timed out (the peer does not advertise while connected) and bluetoothd
# 5.66 died in att_connect_cb() right after, under the first central's transfer.
set_case chunks --message "$OUT/8k.msg"
bounded bumble-two-a 90 "$BLEKIT" receive -a hci0 --from "$PEER_ADDRESS" --timeout 20 &
a=$!
bounded bumble-two-b 90 "$BLEKIT" receive -a hci2 --from "$PEER_ADDRESS" --timeout 20 &
b=$!
wait "$a" "$b"
for side in a b; do
  load "bumble-two-$side"
  check "two centrals and one Bumble peripheral, central $side: the exact message or a clear error (exit $RC)" \
    outcome "bumble-two-$side" "$OUT/8k.msg"
done

bluetoothd_survived "two centrals and one Bumble peripheral"

# --- 6. a central that never confirms an indication -------------------------------------------
# `serve` indicates the Health Thermometer's measurement every 2 s; the peer subscribes for
# indications and never confirms one. ATT allows one unconfirmed indication at a time, so the
# first one hangs: serve must report it (no confirmation within 30 s, one line) or see the
# central leave (bluetoothd's own ATT timeout drops the link, also after 30 s), and go on
# serving either way: a later central still reads the thermometer, and SIGTERM ends serve.
"$BLEKIT" serve profiles/health-thermometer.json -a hci1 --json >"$OUT/silent.jsonl" \
  2>"$OUT/silent.err" &
serve=$!
wait_for 30 grep -q '"serving"' "$OUT/silent.jsonl" || sleep 3
from=$(($(grep -vc '^ready' "$OUT/peer.log") + 1))
set_case silent-central --target "$HCI1" --hold 45
wait_for 120 grep -q '^silent-central: [0-9]* indications' "$OUT/peer.log" \
  || echo "# the silent central did not finish in 120 s"
echo "# peer: $(grep '^silent-central\|^indication' "$OUT/peer.log" | tr '\n' ' ')"
echo "# serve: $(grep -v '"notified"' "$OUT/silent.jsonl" | cut -c1-160 | tr '\n' ' ') stderr: $(head -c 300 "$OUT/silent.err")"
indications=$(sed -n 's/^silent-central: \([0-9]*\) indications.*/\1/p' "$OUT/peer.log" | tail -n 1)
check "silent central: it got ${indications:-0} indication(s) and confirmed none" \
  test "${indications:-0}" -ge 1
check "silent central: serve said so (no confirmation within 30 s) or saw the central leave" \
  bash -c "grep -q 'no central confirmed the indication on 2a1c within 30 s' '$OUT/silent.err' \
    || grep -q '\"disconnected\"' '$OUT/silent.jsonl'"
check "silent central: serve still running" kill -0 "$serve"
bounded silent-read 60 "$BLEKIT" read -a hci0 --timeout 20 "$HCI1" 2a1d
check "silent central: another central then reads 2a1d from serve (exit $RC: $(head -c 80 "$OUT/silent-read.out"))" \
  bash -c "(($RC == 0)) && grep -q '^02' '$OUT/silent-read.out'"
kill -TERM "$serve" 2>/dev/null
wait "$serve"
status=$?
check "silent central: serve ends cleanly on SIGTERM, exit 0 as documented (exit $status)" test "$status" == 0
bluetoothd_survived "a central that never confirms"

# --- 7. two centrals on one `serve` at once: connection and subscription events ---------------
# serve notifies the heart rate every second; blekit on hci0 and on hci2 subscribe at the same
# time and take 3 values each. The controller stops advertising when the first central
# connects; serve registers its advertisement again, so the second can connect meanwhile (in
# rehearsal 4 of 2026-12-04, before serve did, the second connection timed out after 28 s in 3
# runs of 4). Both must get their values, and serve --json must report both connecting and
# leaving; BlueZ 5.66 names only the first subscriber and the last one leaving
# (docs/serve.md), so one "subscribed" and one "unsubscribed" is what it can say.
"$BLEKIT" serve profiles/heart-rate.json -a hci1 --json >"$OUT/two-serve.jsonl" \
  2>"$OUT/two-serve.err" &
serve=$!
wait_for 30 grep -q '"serving"' "$OUT/two-serve.jsonl" || sleep 3
bounded two-notify-a 90 "$BLEKIT" notify -a hci0 --timeout 30 --count 3 "$HCI1" 2a37 &
a=$!
bounded two-notify-b 90 "$BLEKIT" notify -a hci2 --timeout 30 --count 3 "$HCI1" 2a37 &
b=$!
wait "$a" "$b"
served=0
for side in a b; do
  load "two-notify-$side"
  lines=$(wc -l <"$OUT/two-notify-$side.out")
  ((RC == 0 && lines == 3)) && served=$((served + 1))
  check "two centrals on serve, central $side: 3 heart-rate values (exit $RC, $lines lines; $(head -c 120 "$OUT/two-notify-$side.err"))" \
    bash -c "(($RC == 0 && $lines == 3))"
done
sleep 2
kill -TERM "$serve" 2>/dev/null
wait "$serve"
status=$?
echo "# serve: $(grep -v '"notified"' "$OUT/two-serve.jsonl" | cut -c1-140 | tr '\n' ' ')"
centrals() { # centrals EVENT: the distinct centrals of serve's EVENT lines
  grep "\"event\":\"$1\"" "$OUT/two-serve.jsonl" | grep -o '"central":"[0-9A-F:]*"' | sort -u | wc -l
}
check "two centrals on serve: $served of 2 got their values; serve --json reported $(centrals connected) connecting and $(centrals disconnected) leaving" \
  bash -c "(($served == 2 && $(centrals connected) == 2 && $(centrals disconnected) == 2))"
check "two centrals on serve: serve did not report advertising-paused" \
  bash -c "! grep -q '\"advertising-paused\"' '$OUT/two-serve.jsonl'"
check "two centrals on serve: subscribed and unsubscribed on 2a37 reported" \
  bash -c "grep -q '\"event\":\"subscribed\".*2a37\|2a37.*\"event\":\"subscribed\"' '$OUT/two-serve.jsonl' \
    && grep -q '\"event\":\"unsubscribed\".*2a37\|2a37.*\"event\":\"unsubscribed\"' '$OUT/two-serve.jsonl'"
check "two centrals on serve: serve ends cleanly on SIGTERM (exit $status)" test "$status" == 0
bluetoothd_survived "two centrals on serve"

kill "$peer" 2>/dev/null
wait "$peer" 2>/dev/null
echo "# the suite took $((SECONDS - started)) s"
echo "# bluetoothd died ${#BLUETOOTHD_DEATHS[@]} times: ${BLUETOOTHD_DEATHS[*]}"

finish_suite
