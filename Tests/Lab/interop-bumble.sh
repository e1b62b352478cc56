#!/usr/bin/env bash
# Interop in the Bumble air: blekit against peers that BlueZ did not write (Bumble, bleak).
#
#   scripts/lab run --controllers 0 --bumble 2 --env BLEKIT=$PWD/.build/debug/blekit \
#     -- Tests/Lab/interop-bumble.sh
#
# hci0 and hci1 are Bumble controllers that the lab's bluetoothd manages; the peers are
# Tests/Lab/bumble-peer.py processes, each on a controller of its own in the same air
# (docs/lab.md). Cases:
#   1. start order: a Bumble peripheral and `blekit advertise` both advertise before
#      `blekit scan` starts, and the scan still finds them (Bumble's air repeats
#      advertisements, as real air does; btvirt's does not);
#   2. a phone-like Bumble central runs the seed's central flow against `blekit advertise`
#      several times (find, connect, MTU, subscribe, EOM, reply, unsubscribe, disconnect),
#      byte-exact every time, each reply becoming the next message;
#   3. a sensor-like Bumble peripheral: blekit scan, explore, read (short, long, per-read
#      value), notify (Heart Rate, an indicating characteristic), receive (text, binary,
#      several KB: cmp against the sent file, exit 0 because Bumble offers no EATT), and
#      bleak as a central against it (one bluetoothd, but the peer is not BlueZ);
#   4. pairing with Bumble, both directions (INTEROP_PAIRING=0 skips it).
# Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/interop-bumble
mkdir -p "$OUT"
export PYTHONPATH=${LAB_PYLIB:-$PWD/.build-lab/pylib}
PEER=(/usr/bin/python3 Tests/Lab/bumble-peer.py)
SENSOR=C0:FF:EE:00:00:01
TRANSFER=E20A39F4-73F5-4BC4-A12F-17D1AD07A961
LONG_CHAR=6E7A0003-5D3B-4C1E-9A0B-1A2B3C4D5E6F
PER_READ_CHAR=6E7A0004-5D3B-4C1E-9A0B-1A2B3C4D5E6F
INDICATE_CHAR=6E7A0002-5D3B-4C1E-9A0B-1A2B3C4D5E6F

HCI1=$(address_of hci1)

# start_peer NAME ARGS...: a bumble-peer.py process in the background (PEER_PID), its output
# in $OUT/NAME.log; waits (60 s) for its "ready" line.
start_peer() {
  local name=$1
  shift
  "${PEER[@]}" "$@" >"$OUT/$name.log" 2>&1 &
  PEER_PID=$!
  wait_for 60 grep -q '^ready' "$OUT/$name.log"
}
stop_peer() {
  kill "$PEER_PID" 2>/dev/null
  wait "$PEER_PID" 2>/dev/null
}

# Messages: text over several chunks, binary (not UTF-8, every byte value), several KB.
for i in $(seq 1 40); do printf 'Bumble %02d: grüße, EOM is only text here. ' "$i"; done >"$OUT/text.msg"
/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) % 256 for i in range(3000)) + b"\xff\xfe\xc3")' >"$OUT/binary.msg"
for i in $(seq 1 120); do printf 'line %03d of a message of several KB sent by a Bumble sensor\n' "$i"; done >"$OUT/large.msg"

# scan_finds ADDRESS NAME: `blekit scan` on hci0 until ADDRESS shows up with the transfer
# service (at most 12 s); its output in $OUT/NAME.txt.
scan_finds() {
  "$BLEKIT" scan -a hci0 --timeout 12 >"$OUT/$2.txt" 2>"$OUT/$2.err" &
  local scan=$! rc
  wait_for 13 grep -q "^$1 .*${TRANSFER,,}" "$OUT/$2.txt"
  rc=$?
  kill "$scan" 2>/dev/null
  wait "$scan" 2>/dev/null
  return $rc
}

# --- 1. start order on Bumble's air ------------------------------------------------------
# The sensor serves text.msg to its first subscriber, binary.msg to the second, large.msg to
# every later one.
check "the Bumble sensor starts and advertises" start_peer sensor sensor \
  --message "$OUT/text.msg" --message "$OUT/binary.msg" --message "$OUT/large.msg"
sleep 3
check "blekit scan started 3 s after the Bumble peripheral began advertising finds it (no start-order choreography)" \
  scan_finds "$SENSOR" scan-sensor

# --- 3. the sensor-like peripheral (while it runs) ----------------------------------------
"$BLEKIT" explore -a hci0 "$SENSOR" >"$OUT/explore.txt" 2>"$OUT/explore.err"
missing=""
for s in "${TRANSFER,,}" 180f 180d 6e7a0001; do
  grep -qi "^service $s" "$OUT/explore.txt" || missing+=" $s"
done
check "explore lists the transfer, Battery, Heart Rate and sensor services${missing:+ (missing:$missing)}" \
  test -z "$missing"
check "explore shows the battery level (87 = 0x57)" grep -qi 'value  57' "$OUT/explore.txt"
check "read 2a19 prints 57" bash -c "[[ \$('$BLEKIT' read -a hci0 $SENSOR 2a19 2>>'$OUT/read.err') == 57 ]]"
"$BLEKIT" read -a hci0 --raw "$SENSOR" "$LONG_CHAR" >"$OUT/long.bin" 2>"$OUT/long.err"
rc=$?
/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(600)))' >"$OUT/long.expected"
check "read of the 600-byte value (long reads at MTU 185): exit 0, bluetoothd's first 512 bytes exact (it cuts the rest)" \
  bash -c "(($rc == 0)) && cmp -s '$OUT/long.bin' <(head -c 512 '$OUT/long.expected')"
# Explore read it once already; each read must be a new value, whole across its pieces.
first=""
for n in 1 2; do
  "$BLEKIT" read -a hci0 --raw "$SENSOR" "$PER_READ_CHAR" >"$OUT/per-read-$n.bin" 2>>"$OUT/per-read.err"
  count=$(head -c 12 "$OUT/per-read-$n.bin" | sed -n 's/^read #\([0-9]*\):.*/\1/p')
  [[ -n $first ]] || first=$count
  expected=$(/usr/bin/python3 -c "n='${count:-x}'; print((f'read #{n}:' + f'<{n}>' * 400)[:400], end='')")
  check "per-read value, read $n: value #${count:-?} (a fresh one each read), its 400 bytes whole across the long read's offsets" \
    bash -c "[[ -n '$count' && $n == 1 || '$count' == $((first + 1)) ]] && [[ \$(cat '$OUT/per-read-$n.bin') == '$expected' ]]"
done
"$BLEKIT" notify -a hci0 --count 10 "$SENSOR" 2a37 >"$OUT/heart-rate.txt" 2>"$OUT/heart-rate.err"
check "notify 2a37 --count 10: ten Heart Rate measurements 70..79 bpm" \
  bash -c "[[ \$(wc -l <'$OUT/heart-rate.txt') == 10 ]] && [[ \$(head -1 '$OUT/heart-rate.txt') == 0046 ]] && [[ \$(tail -1 '$OUT/heart-rate.txt') == 004f ]]"
"$BLEKIT" notify -a hci0 --count 3 --text "$SENSOR" "$INDICATE_CHAR" >"$OUT/indicate.txt" 2>"$OUT/indicate.err"
check "notify on the indicating characteristic: indication 1..3" \
  bash -c "[[ \$(cat '$OUT/indicate.txt') == \$'indication 1\nindication 2\nindication 3' ]]"
"$BLEKIT" receive -a hci0 --from "$SENSOR" --reply "thanks, Bumble" >"$OUT/text.out" 2>"$OUT/text.err"
rc=$?
check "receive from the Bumble sensor: exit 0 (no EATT there), bytes exact (text, $(wc -c <"$OUT/text.msg") bytes)" \
  bash -c "(($rc == 0)) && cmp -s '$OUT/text.msg' '$OUT/text.out'"
check "the Bumble sensor got the reply written without response" \
  wait_for 10 grep -q '^reply thanks, Bumble' "$OUT/sensor.log"
for kind in binary large; do
  "$BLEKIT" receive -a hci0 --from "$SENSOR" >"$OUT/$kind.out" 2>"$OUT/$kind.err"
  rc=$?
  check "receive from the Bumble sensor: exit 0, bytes exact ($kind, $(wc -c <"$OUT/$kind.msg") bytes)" \
    bash -c "(($rc == 0)) && cmp -s '$OUT/$kind.msg' '$OUT/$kind.out'"
done
# bleak here: one bluetoothd, but its peer is not BlueZ, so the Connected race of two BlueZ
# adapters in one bluetoothd (interop-bleak.sh) cannot happen.
/usr/bin/python3 Tests/Lab/bleak-peer.py central --adapter hci0 --expect "$OUT/large.msg" --trials 3 \
  >"$OUT/bleak-sensor.txt" 2>&1
sed 's/^/# bleak: /' "$OUT/bleak-sensor.txt"
check "bleak central against the Bumble sensor (one bluetoothd): 3 of 3 first connects, byte-exact" \
  grep -q '^first-connect 3/3 exact 3/3' "$OUT/bleak-sensor.txt"
stop_peer

# --- 1 (cont.) and 2: blekit advertise, then a Bumble central ------------------------------
"$BLEKIT" advertise -a hci1 --file "$OUT/text.msg" >"$OUT/advertise.out" 2>"$OUT/advertise.err" &
ADV=$!
sleep 4
check "blekit scan started 4 s after blekit advertise finds it (no start-order choreography)" \
  scan_finds "$HCI1" scan-advertise
"${PEER[@]}" central --expect "$OUT/text.msg" --iterations 4 >"$OUT/central.txt" 2>"$OUT/central.err"
sed 's/^/# bumble central: /' "$OUT/central.txt"
check "a phone-like Bumble central against blekit advertise: 4 of 4 iterations byte-exact (find, MTU 185, subscribe, EOM, reply, unsubscribe, disconnect)" \
  grep -q '^central 4/4 exact' "$OUT/central.txt"
check "blekit advertise printed each of the central's replies" \
  bash -c "[[ \$(grep -c 'reply from the Bumble central' '$OUT/advertise.out') == 4 ]]"
kill "$ADV" 2>/dev/null
wait "$ADV" 2>/dev/null

# --- 4. pairing with Bumble ----------------------------------------------------------------
if [[ ${INTEROP_PAIRING:-1} == 1 ]]; then
  # blekit pair initiates; a Bumble peripheral accepts. ARGS for the peer, then for blekit.
  pair_case() { # pair_case NAME "PEER ARGS" "BLEKIT PAIR ARGS" EXPECTED-PEER-LINE
    local name=$1 peer_args=$2 pair_args=$3 expected=$4 address rc
    rm -f "${LAB_SHARED:-/tmp}/passkey"
    # shellcheck disable=SC2086
    if ! start_peer "pair-$name" pair-peripheral $peer_args; then
      fail "$name: the Bumble peripheral did not start"
      return
    fi
    address=$(awk '/^ready/ {print $2; exit}' "$OUT/pair-$name.log")
    # shellcheck disable=SC2086
    "$BLEKIT" pair -a hci0 --confirm auto $pair_args "$address" >"$OUT/pair-$name.out" 2>"$OUT/pair-$name.err" &
    local pair=$!
    if [[ $peer_args == *KEYBOARD_INPUT_ONLY* ]]; then
      # blekit displays the passkey (logged on stderr); the Bumble side types it.
      wait_for 30 grep -qE '[0-9]{6}' "$OUT/pair-$name.err" &&
        grep -oE '[0-9]{6}' "$OUT/pair-$name.err" | head -1 >"${LAB_SHARED:-/tmp}/passkey"
    fi
    wait "$pair"
    rc=$?
    sed 's/^/# blekit pair: /' "$OUT/pair-$name.out" "$OUT/pair-$name.err"
    check "$name: blekit pair exits 0, paired and bonded" \
      bash -c "(($rc == 0)) && grep -qi 'paired.*yes' '$OUT/pair-$name.out' && grep -qi 'bonded.*yes' '$OUT/pair-$name.out'"
    check "$name: the Bumble peripheral reports '$expected'" \
      wait_for 10 grep -q "^$expected" "$OUT/pair-$name.log"
    stop_peer
  }
  pair_case "just works, LE Secure Connections" "--io-capability NO_OUTPUT_NO_INPUT" "" \
    "paired sc=yes bonded=yes encrypted=yes"
  # Numeric comparison under --confirm auto: nobody compared the numbers, so blekit's agent
  # says no (a yes would have the kernel record the key as protected against a man in the
  # middle), says why, and nothing is bonded.
  refused_comparison_case() {
    local name="numeric comparison, LE Secure Connections, --confirm auto" address rc
    if ! start_peer "pair-comparison" pair-peripheral --io-capability DISPLAY_OUTPUT_AND_YES_NO_INPUT; then
      fail "$name: the Bumble peripheral did not start"
      return
    fi
    address=$(awk '/^ready/ {print $2; exit}' "$OUT/pair-comparison.log")
    "$BLEKIT" pair -a hci0 --confirm auto --capability DisplayYesNo "$address" \
      >"$OUT/pair-comparison.out" 2>"$OUT/pair-comparison.err"
    rc=$?
    sed 's/^/# blekit pair: /' "$OUT/pair-comparison.out" "$OUT/pair-comparison.err"
    check "$name: refused (exit $rc), the agent says comparing needs a person" \
      bash -c "(($rc != 0)) && grep -q 'comparing passkeys needs --confirm prompt' '$OUT/pair-comparison.err' && ! grep -qi 'bonded.*yes' '$OUT/pair-comparison.out'"
    stop_peer
  }
  refused_comparison_case
  pair_case "passkey entry (blekit displays, Bumble types), legacy pairing" \
    "--io-capability KEYBOARD_INPUT_ONLY --no-sc" "--capability DisplayOnly" \
    "paired sc=no bonded=yes encrypted=yes"

  # A Bumble central initiates against blekit advertise --pairable --secure, then reconnects
  # and encrypts with the stored keys.
  "$BLEKIT" advertise -a hci1 --message "paired hello" --pairable --secure --confirm auto \
    >"$OUT/advertise-pairable.out" 2>"$OUT/advertise-pairable.err" &
  ADV=$!
  sleep 2
  "${PEER[@]}" pair-central --address "$HCI1" --reconnect --timeout 30 >"$OUT/pair-central.txt" 2>&1
  sed 's/^/# bumble pair-central: /' "$OUT/pair-central.txt"
  check "a Bumble central pairs with blekit advertise --pairable --secure (just works, LE SC, bonded)" \
    grep -q '^paired sc=yes bonded=yes encrypted=yes' "$OUT/pair-central.txt"
  check "the Bumble central reconnects and encrypts with the stored keys" \
    grep -q '^reconnected encrypted=yes' "$OUT/pair-central.txt"
  kill "$ADV" 2>/dev/null
  wait "$ADV" 2>/dev/null
fi

finish_suite
