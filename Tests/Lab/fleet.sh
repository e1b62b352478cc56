#!/usr/bin/env bash
# Lab test of the MQTT gateways and `blekit fleet` (issue 19):
#
#   scripts/lab run --controllers 3 --env BLEKIT=$PWD/.build/debug/blekit -- Tests/Lab/fleet.sh
#
# One VM, one bluetoothd, three controllers in one air. A mosquitto broker runs inside the
# guest on its loopback (the lab has no network, and needs none). Two gateways,
# `monitor --mqtt` on hci0 (gw-a) and on hci1 (gw-b), publish with QoS 1; hci2 advertises
# FolkBears IDs in turn (ID1, ID2, ID3). mosquitto_sub (persistent session) and
# `blekit fleet` (persistent session) listen. While ID2 is advertised the broker is stopped
# and started again. Checks: every ID reaches mosquitto_sub and fleet from both gateways;
# each gateway's sequence numbers arrive without a gap beyond the drops it counted and
# reported; the gateways said the loss and the reconnection on stderr. Then mqtts://: a scan
# gateway over TLS (the lab's own CA) and a refusal without the CA. Prints "ok" or
# "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/fleet
mkdir -p "$OUT"
passed=0
failed=0
IDS=(0102030405060708090a0b0c0d0e0f10 a1a2a3a4a5a6a7a8a9aaabacadaeafb0 f0e0d0c0b0a090807060504030201000)
PORT=1883
URL=mqtt://127.0.0.1:$PORT
WINDOW=5

ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

# The broker: persistence in /tmp (the guest's tmpfs), so sessions survive its restart. A
# second listener speaks TLS only (mqtts://), with a certificate for 127.0.0.1 signed by a CA
# made here.
mkdir -p /tmp/mosquitto
TLS_PORT=8883
(
  cd /tmp/mosquitto || exit 1
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  printf 'subjectAltName=IP:127.0.0.1\n' >san.cnf
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=blekit lab CA" &&
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=127.0.0.1 &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
      -days 2 -extfile san.cnf
) >"$OUT/openssl.log" 2>&1
cat >/tmp/mosquitto/mosquitto.conf <<CONF
allow_anonymous true
persistence true
persistence_location /tmp/mosquitto/
user root
listener $PORT 127.0.0.1
listener $TLS_PORT 127.0.0.1
cafile /tmp/mosquitto/ca.pem
certfile /tmp/mosquitto/server.pem
keyfile /tmp/mosquitto/server.key
CONF
BROKER=
start_broker() {
  mosquitto -c /tmp/mosquitto/mosquitto.conf >>"$OUT/mosquitto.log" 2>&1 &
  BROKER=$!
  wait_for 10 mosquitto_pub -p "$PORT" -t blekit-lab/ping -m up
}
stop_broker() {
  kill -TERM "$BROKER"
  wait "$BROKER" 2>/dev/null
}
check "mosquitto starts inside the guest" start_broker

mosquitto_sub -p "$PORT" -c -i lab-sub -q 1 -v -t 'blekit/#' >"$OUT/sub.txt" 2>"$OUT/sub.err" &
SUB=$!
"$BLEKIT" fleet --mqtt "$URL" --mqtt-client-id lab-fleet >"$OUT/fleet.json" 2>"$OUT/fleet.err" &
FLEET=$!
for gw in a b; do
  adapter=hci0
  [[ $gw == b ]] && adapter=hci1
  "$BLEKIT" monitor -a "$adapter" --json --restart 60 --mqtt "$URL" --gateway "gw-$gw" \
    --mqtt-qos 1 --mqtt-interval 0 --mqtt-summary 5 >"$OUT/monitor-$gw.json" 2>"$OUT/monitor-$gw.err" &
  eval "GW_$gw=\$!"
done
check "both gateways run their discovery" wait_for 60 sh -c \
  "grep -q '\"type\":\"start\"' '$OUT/monitor-a.json' && grep -q '\"type\":\"start\"' '$OUT/monitor-b.json'"
check "both gateways are online for fleet" \
  wait_for 20 sh -c "grep -q 'gateway gw-a online' '$OUT/fleet.err' && grep -q 'gateway gw-b online' '$OUT/fleet.err'"

advertise() { # advertise ID SECONDS
  "$BLEKIT" advertise -a hci2 --message x --no-service-uuid --manufacturer "0xFFFF:0210$1" \
    --timeout "$2" >>"$OUT/advertise.log" 2>&1
}
advertise "${IDS[0]}" "$WINDOW"
advertise "${IDS[1]}" "$((WINDOW + 4))" &
ADV=$!
sleep 2
stop_broker
sleep 3
check "mosquitto restarts" start_broker
wait "$ADV"
advertise "${IDS[2]}" "$WINDOW"

# Both gateways said the loss and the reconnection.
for gw in a b; do
  check "gw-$gw said the broker loss on stderr" wait_for 20 grep -q 'mqtt: lost' "$OUT/monitor-$gw.err"
  check "gw-$gw reconnected" wait_for 40 grep -q 'mqtt: reconnected' "$OUT/monitor-$gw.err"
done
for id in "${IDS[@]}"; do
  for gw in a b; do
    check "mosquitto_sub got $id from gw-$gw" \
      wait_for 30 grep -q "^blekit/gw-$gw/ids/$id " "$OUT/sub.txt"
  done
  check "fleet merged $id from both gateways" wait_for 30 sh -c \
    "grep '\"id\":\"$id\"' '$OUT/fleet.json' | grep -q '\"gateway\":\"gw-a\".*\"gateway\":\"gw-b\"'"
done

# End the gateways (SIGINT: summary, final MQTT summaries, the counts line).
kill -INT "$GW_a" "$GW_b"
wait "$GW_a"
rc_a=$?
wait "$GW_b"
rc_b=$?
check "both gateways end with status 0 ($rc_a, $rc_b)" test "$rc_a" = 0 -a "$rc_b" = 0
sleep 2
for gw in a b; do
  line=$(grep '^mqtt: ' "$OUT/monitor-$gw.err" | tail -1)
  echo "gw-$gw: $line"
  dropped=$(sed -n 's/.* \([0-9]*\) dropped.*/\1/p' <<<"$line")
  unsent=$(sed -n 's/.* \([0-9]*\) unsent.*/\1/p' <<<"$line")
  # The sequence numbers mosquitto_sub received from this gateway, distinct.
  grep "^blekit/gw-$gw/" "$OUT/sub.txt" | grep -o '"seq":[0-9]*' | cut -d: -f2 | sort -n -u \
    >"$OUT/seq-$gw.txt"
  last=$(tail -1 "$OUT/seq-$gw.txt")
  got=$(wc -l <"$OUT/seq-$gw.txt")
  echo "gw-$gw: $got distinct sequence numbers received, last $last, $dropped dropped, $unsent unsent"
  check "gw-$gw: the counts line was printed" test -n "$dropped" -a -n "$unsent"
  check "gw-$gw: nothing lost beyond the reported drops" \
    test "$((${last:-0} - got))" -le "$((${dropped:-0} + ${unsent:-0}))" -a "${last:-0}" -gt 0
done
check "fleet saw gw-a go offline (its last will or its goodbye)" \
  wait_for 10 grep -q 'gateway gw-a offline' "$OUT/fleet.err"

kill -INT "$FLEET" 2>/dev/null
wait "$FLEET"
kill "$SUB" 2>/dev/null

# mqtts://: a scan gateway publishes over TLS, checked against the lab's CA; a subscriber over
# TLS gets its sightings. Without the CA the gateway refuses at once, in one line, exit 14.
TLS_URL=mqtts://127.0.0.1:$TLS_PORT
mosquitto_sub -p "$TLS_PORT" --cafile /tmp/mosquitto/ca.pem -h 127.0.0.1 -v -t 'blekit/gw-tls/#' \
  >"$OUT/sub-tls.txt" 2>"$OUT/sub-tls.err" &
SUB_TLS=$!
"$BLEKIT" scan -a hci0 --json --timeout 12 --mqtt "$TLS_URL" --mqtt-ca /tmp/mosquitto/ca.pem \
  --gateway gw-tls --mqtt-interval 0 >"$OUT/scan-tls.json" 2>"$OUT/scan-tls.err" &
SCAN_TLS=$!
sleep 3
advertise "${IDS[0]}" "$WINDOW"
wait "$SCAN_TLS"
rc=$?
check "scan --mqtt mqtts:// with --mqtt-ca ends with status 0 ($rc)" test "$rc" = 0
# (Which ID: hci0's bluetoothd may still hold hci2's device with an earlier ID, reported once.)
check "a TLS subscriber got gw-tls's sightings ($(grep -c '^blekit/gw-tls/ids/' "$OUT/sub-tls.txt") messages)" \
  wait_for 10 grep -q "^blekit/gw-tls/ids/[0-9a-f]\{32\} {\"type\":\"sighting\"" "$OUT/sub-tls.txt"
kill "$SUB_TLS" 2>/dev/null
"$BLEKIT" scan -a hci0 --timeout 5 --mqtt "$TLS_URL" --gateway gw-tls \
  >"$OUT/scan-untrusted.out" 2>"$OUT/scan-untrusted.err"
rc=$?
check "mqtts:// without the CA: exit 14, one line naming the failed verification ($rc: $(head -c 200 "$OUT/scan-untrusted.err"))" \
  sh -c "test $rc = 14 && test \$(wc -l <'$OUT/scan-untrusted.err') = 1 && grep -q 'certificate verify failed' '$OUT/scan-untrusted.err'"
stop_broker
echo "$passed passed, $failed failed"
((failed == 0))
