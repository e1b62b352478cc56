#!/usr/bin/env bash
# One host's part of the fleet suite (Tests/Lab/fleet starts the broker and the lab):
#
#   Tests/Lab/fleet.sh a|b        inside `scripts/lab two-host --controllers 2 --forward ...`
#
# Both hosts run a gateway on hci0 (`monitor --mqtt`, QoS 1, every sighting, summaries every
# 5 s) against the broker at $LAB_FORWARDED. Host a also advertises the IDs in $FLEET_IDS from
# hci1, one after another; while the second is on air it asks the broker side to restart the
# broker (file restart-broker in $LAB_SHARED, answered by broker-restarted), and after the
# third it says advertised. When the broker side writes stop (everything arrived, or it gave
# up), each host ends its gateway with SIGINT. Host a then publishes over mqtts:// with the
# lab's CA ($FLEET_CA) and is refused without it. Prints "ok"/"FAIL" per check, then
# "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
ROLE=${1:?usage: fleet.sh a|b}
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/fleet
SHARED=${LAB_SHARED:?not in a two-host lab}
mkdir -p "$OUT"
read -r -a IDS <<<"${FLEET_IDS:?}"
URL=mqtt://${LAB_FORWARDED:?the lab has no --forward}:1883
WINDOW=5
advertise() { # advertise ID SECONDS
  "$BLEKIT" advertise -a hci1 --message x --no-service-uuid --manufacturer "0xFFFF:0210$1" \
    --timeout "$2" >>"$OUT/advertise.log" 2>&1
}

"$BLEKIT" monitor -a hci0 --json --restart 60 --mqtt "$URL" --gateway "gw-$ROLE" \
  --mqtt-qos 1 --mqtt-interval 0 --mqtt-summary 5 >"$OUT/monitor.json" 2>"$OUT/monitor.err" &
GATEWAY=$!
check "gw-$ROLE runs its discovery" wait_for 60 grep -q '"type":"start"' "$OUT/monitor.json"
: >"$SHARED/$ROLE-ready"

if [[ $ROLE == a ]]; then
  check "host b's gateway runs too" wait_for 90 test -e "$SHARED/b-ready"
  advertise "${IDS[0]}" "$WINDOW"
  advertise "${IDS[1]}" "$((WINDOW + 4))" &
  adv=$!
  sleep 2
  : >"$SHARED/restart-broker"
  check "the broker side restarted the broker" wait_for 30 test -e "$SHARED/broker-restarted"
  wait "$adv"
  advertise "${IDS[2]}" "$WINDOW"
  : >"$SHARED/advertised"
else
  check "host a had the broker restarted" wait_for 200 test -e "$SHARED/broker-restarted"
fi
check "gw-$ROLE said the broker loss on stderr" wait_for 30 grep -q 'mqtt: lost' "$OUT/monitor.err"
check "gw-$ROLE reconnected" wait_for 40 grep -q 'mqtt: reconnected' "$OUT/monitor.err"
check "the broker side said stop" wait_for 150 test -e "$SHARED/stop"

# End the gateway (SIGINT: summary, final MQTT summaries, the counts line).
kill -INT "$GATEWAY"
wait "$GATEWAY"
rc=$?
check "gw-$ROLE ends with status 0 ($rc)" test "$rc" = 0
check "gw-$ROLE printed its counts line ($(grep '^mqtt: ' "$OUT/monitor.err" | tail -1))" \
  grep -q '^mqtt: .* dropped.* unsent' "$OUT/monitor.err"

if [[ $ROLE == a ]]; then
  # mqtts://: a scan gateway publishes over TLS, checked against the lab's CA (the broker
  # side's subscriber checks what arrived). Without the CA it refuses at once, exit 14.
  TLS_URL=mqtts://$LAB_FORWARDED:8883
  "$BLEKIT" scan -a hci0 --json --timeout 12 --mqtt "$TLS_URL" --mqtt-ca "$FLEET_CA" \
    --gateway gw-tls --mqtt-interval 0 >"$OUT/scan-tls.json" 2>"$OUT/scan-tls.err" &
  scan=$!
  sleep 3
  advertise "${IDS[0]}" "$WINDOW"
  wait "$scan"
  rc=$?
  check "scan --mqtt mqtts:// with --mqtt-ca ends with status 0 ($rc)" test "$rc" = 0
  "$BLEKIT" scan -a hci0 --timeout 5 --mqtt "$TLS_URL" --gateway gw-tls \
    >"$OUT/scan-untrusted.out" 2>"$OUT/scan-untrusted.err"
  rc=$?
  check "mqtts:// without the CA: exit 14, one line naming the failed verification ($rc: $(head -c 200 "$OUT/scan-untrusted.err"))" \
    sh -c "test $rc = 14 && test \$(wc -l <'$OUT/scan-untrusted.err') = 1 && grep -q 'certificate verify failed' '$OUT/scan-untrusted.err'"
fi
finish_suite "fleet host $ROLE"
