#!/usr/bin/env bash
# Lab test of `blekit monitor` (seed 004) and the advertising options it is fed with:
#
#   scripts/lab run --env BLEKIT=$PWD/.build/debug/blekit -- Tests/Lab/monitor.sh [BLEKIT]
#
# A monitor on hci0 runs through phases on hci1 (each a fixed window): a TempUserId from
# `blekit advertise --manufacturer`, another from bluetoothctl's advertise.manufacturer, then
# malformed payloads of 1, 3 and 19 bytes. Then: the too-large advertisement exits 9 before
# bluetoothd is asked; the dynamic read characteristic (long value, clock); the monitor stops
# cleanly when the adapter is powered off and when bluetoothd goes away. Prints "ok" or
# "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/monitor
mkdir -p "$OUT"
HCI1=00:AA:01:01:00:01
ID1=0102030405060708090a0b0c0d0e0f10
ID2=a1a2a3a4a5a6a7a8a9aaabacadaeafb0
WINDOW=5
READ_CHAR=8eaae4b3-b2e1-4d09-b847-f21676e24277


discovering() { [[ $(prop "/org/bluez/$1" org.bluez.Adapter1 Discovering) == "boolean true" ]]; }
powered() { [[ $(prop "/org/bluez/$1" org.bluez.Adapter1 Powered) == "boolean true" ]]; }
set_powered() {
  dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$1" \
    org.freedesktop.DBus.Properties.Set string:org.bluez.Adapter1 string:Powered \
    "variant:boolean:$2" >/dev/null
}

# count_of FILE ID: the "count" of ID in the summary line of a --json run.
count_of() {
  grep '"type":"summary"' "$1" | grep -o "\"id\":\"$2\"[^}]*" | grep -o '"count":[0-9]*' |
    cut -d: -f2
}

# blekit_advertise SECONDS HEX: advertise 0xFFFF:HEX on hci1 (no service UUID) for a window.
blekit_advertise() {
  "$BLEKIT" advertise -a hci1 --message x --no-service-uuid --manufacturer "0xFFFF:$2" \
    --timeout "$1" >>"$OUT/advertise.log" 2>&1
}

# --- the monitor over fixed windows ---------------------------------------------------------
# --restart 60: the emulator reports an advertiser when it registers, and the kernel drops a
# report that comes while discovery restarts, so the monitor keeps one discovery session.
"$BLEKIT" monitor -a hci0 --json --restart 60 >"$OUT/monitor.json" 2>"$OUT/monitor.err" &
MON=$!
check "monitor --json starts with a start line once discovery runs" \
  wait_for 60 grep -q '"type":"start"' "$OUT/monitor.json"

# Each window registers its advertisement twice (each registration is reported).
t0=$SECONDS
blekit_advertise "$WINDOW" "0210$ID1"
blekit_advertise "$WINDOW" "0210$ID1"
t1=$SECONDS

# bluetoothctl's own advertisement (advertise.manufacturer), twice for the same window.
{
  echo "select $HCI1"
  echo "advertise.discoverable on"
  echo "advertise.manufacturer 0xffff 0x02 0x10 $(sed 's/../0x& /g' <<<"$ID2")"
  echo "advertise on"
  sleep "$WINDOW"
  echo "advertise off"
  sleep 1
  echo "advertise on"
  sleep "$WINDOW"
  echo "advertise off"
  sleep 1
} | bluetoothctl >"$OUT/bluetoothctl.log" 2>&1
t2=$SECONDS

# Malformed: 1 byte (too short), 3 bytes (too short), 19 bytes (one trailing byte).
for hex in 02 021001 "0210${ID1}ff"; do
  blekit_advertise 3 "$hex"
done

kill -INT "$MON"
wait "$MON"
rc=$?
check "monitor exits 0 on Ctrl-C (exit $rc)" test "$rc" = 0
check "monitor prints a JSON summary last" bash -c "tail -n1 '$OUT/monitor.json' | grep -q '\"type\":\"summary\"'"

n1=$(count_of "$OUT/monitor.json" "$ID1")
n2=$(count_of "$OUT/monitor.json" "$ID2")
echo "     ID1 (blekit advertise, $((t1 - t0)) s): ${n1:-0} sightings;" \
  "ID2 (bluetoothctl, $((t2 - t1)) s): ${n2:-0} sightings"
# Plausible: seen at least once in the window, and no more often than a legacy advertiser can
# send (one PDU per 20 ms). The emulator reports an advertiser mostly when it registers, not
# at each scan restart, so a few sightings per window is what the lab gives.
plausible() { [[ -n $1 ]] && (($1 >= 1 && $1 <= $2 * 50)); }
check "decodes blekit advertise's TempUserId, ${n1:-0} sightings in $((t1 - t0)) s" \
  plausible "${n1:-}" "$((t1 - t0))"
check "decodes bluetoothctl's TempUserId, ${n2:-0} sightings in $((t2 - t1)) s" \
  plausible "${n2:-}" "$((t2 - t1))"
check "sighting lines carry the ID and the advertiser's address" \
  grep -q "\"type\":\"sighting\".*\"id\":\"$ID1\",\"address\":\"$HCI1\"" "$OUT/monitor.json"
for len in 1 3 19; do
  check "a malformed payload of $len byte(s) is counted and skipped" \
    grep -q "\"type\":\"malformed\".*\"length\":$len," "$OUT/monitor.json"
done
check "no ID was made of a malformed payload" \
  bash -c "! grep '\"type\":\"sighting\"' '$OUT/monitor.json' | grep -vqE '\"id\":\"($ID1|$ID2)\"'"
check "the summary counts malformed payloads by reason" \
  grep -qE '"malformed":\{"too short":[1-9][0-9]*,"trailing bytes":[1-9]' "$OUT/monitor.json"
check "monitor wrote nothing to standard error" test ! -s "$OUT/monitor.err"

# --- the advertisement that cannot fit ----------------------------------------------------
"$BLEKIT" advertise -a hci1 --message x --manufacturer "0xFFFF:0210$ID1" \
  >"$OUT/too-large.out" 2>&1
rc=$?
check "flags + 128-bit UUID + 22 bytes of manufacturer data exits 9 (exit $rc)" test "$rc" = 9
check "with a one-line breakdown: $(head -n1 "$OUT/too-large.out")" \
  grep -q 'flags 3, 128-bit service UUID 18, manufacturer data 0xFFFF 22' "$OUT/too-large.out"

# --- text output of a short run --------------------------------------------------------------
"$BLEKIT" monitor -a hci0 --timeout 20 --restart 60 >"$OUT/monitor.txt" 2>&1 &
MON=$!
wait_for 60 discovering hci0
sleep 1
blekit_advertise 5 "0210$ID1"
wait "$MON"
rc=$?
check "monitor --timeout exits 0 (exit $rc)" test "$rc" = 0
check "text mode: a line for the new ID and a summary row" \
  bash -c "grep -q '^new  $ID1  from $HCI1' '$OUT/monitor.txt' && grep -qE '^$ID1 +[0-9]+ ' '$OUT/monitor.txt'"
sed 's/^/     | /' "$OUT/monitor.txt"

# --- scan --name ----------------------------------------------------------------------------
# scan_named FILTER OUTPUT: a scan with --name FILTER while hci1 advertises lab-monitor-peer.
scan_named() {
  "$BLEKIT" scan -a hci0 --name "$1" --timeout 15 --json >"$2" 2>&1 &
  local scan=$!
  wait_for 60 discovering hci0
  sleep 2
  "$BLEKIT" advertise -a hci1 --message x --name lab-monitor-peer --timeout 5 >/dev/null 2>&1
  wait "$scan"
}
scan_named lab-MON "$OUT/scan-name.json"
check "scan --name lab-MON finds lab-monitor-peer (case-insensitive)" \
  grep -q "\"address\":\"$HCI1\",\"addressType\":\"[a-z]*\",\"name\":\"lab-monitor-peer\"" \
  "$OUT/scan-name.json"
scan_named no-such-name "$OUT/scan-noname.out"
rc=$?
check "scan --name no-such-name leaves it out (exit $rc)" \
  bash -c "[[ $rc == 0 ]] && ! grep -q '$HCI1' '$OUT/scan-noname.out'"

# --- the dynamic read characteristic (seed 003) ----------------------------------------------
DEV=/org/bluez/hci0/dev_${HCI1//:/_}
# read_char_path: the object path of blekit's read characteristic on the connected device.
read_char_path() {
  local path
  for path in $(busctl tree --list org.bluez 2>/dev/null | grep "^$DEV/service[0-9a-f]*/char[0-9a-f]*$"); do
    busctl get-property org.bluez "$path" org.bluez.GattCharacteristic1 UUID 2>/dev/null |
      grep -qi "$READ_CHAR" && echo "$path"
  done
}
connect_dev() {
  busctl call org.bluez "$DEV" org.bluez.Device1 Connect >>"$OUT/connect.out" 2>&1
  wait_for 30 bash -c "busctl get-property org.bluez $DEV org.bluez.Device1 ServicesResolved 2>/dev/null | grep -q true"
}
# forget_dev: disconnect and remove the device, so the next server's handles are not cached.
forget_dev() {
  busctl call org.bluez "$DEV" org.bluez.Device1 Disconnect >/dev/null 2>&1
  busctl call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o "$DEV" >/dev/null 2>&1
}
read_at() { busctl call org.bluez "$CHAR" org.bluez.GattCharacteristic1 ReadValue 'a{sv}' 1 offset q "$1" 2>&1; }

LONG=$(printf 'blekit-%04d;' $(seq 1 42))blekit-0  # 512 bytes, an attribute's most
# hci1 forgotten, then the reader first (it scans), then the advertiser: in this emulated air
# an advertiser is reported only when its advertising switches on under a running scan
# (docs/lab.md). Advertising started before the read's scan was never seen (CI rehearsal,
# 2026-12-03: "no device ... was seen on hci0 within 19.8 s"); a read of a device bluetoothd
# still knew connected at once, before the advertiser was up, and timed out.
busctl call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o \
  "/org/bluez/hci0/dev_${HCI1//:/_}" >/dev/null 2>&1
"$BLEKIT" read -a hci0 "$HCI1" "$READ_CHAR" --text >"$OUT/read-long.out" 2>"$OUT/read-long.err" &
reader=$!
wait_discovering hci0 10 || true
"$BLEKIT" advertise -a hci1 --message x --read-value "$LONG" --timeout 90 \
  >"$OUT/read-adv.log" 2>&1 &
ADV=$!
wait "$reader"
rc=$?
check "blekit read of the ${#LONG}-byte dynamic value (exit $rc)" \
  test "$(cat "$OUT/read-long.out")" = "$LONG"
# 512 bytes is the most an attribute holds: read says that bluetoothd would cut a longer one.
check "blekit read notes that 512 bytes is an attribute's limit: $(head -c 200 "$OUT/read-long.err")" \
  grep -q "the most an attribute holds" "$OUT/read-long.err"
# Offsets through bluetoothd's own client: ReadValue with an offset sends ATT Read Blob.
connect_dev
CHAR=$(read_char_path)
echo "     read characteristic: ${CHAR:-not found}"
r500=$(read_at 500)
r512=$(read_at 512)
r513=$(read_at 513)
check "read blob at offset 500 returns the last 12 bytes: $r500" \
  bash -c "[[ '$r500' == 'ay 12 '* ]]"
check "read blob at offset 512 (the end) returns nothing: $r512" test "$r512" = "ay 0"
check "read blob at offset 513 answers InvalidOffset: $r513" \
  bash -c "grep -qi 'offset' <<<'$r513'"
forget_dev
kill -INT "$ADV"
wait "$ADV"

# The device was removed: blekit read scans first, then the advertisement registers.
"$BLEKIT" read -a hci0 "$HCI1" "$READ_CHAR" --text --timeout 40 >"$OUT/clock1.out" 2>&1 &
READER=$!
wait_for 60 discovering hci0
sleep 2
"$BLEKIT" advertise -a hci1 --message x --read-clock --timeout 90 >"$OUT/clock-adv.log" 2>&1 &
ADV=$!
wait "$READER"
connect_dev
CHAR=$(read_char_path)
c1=$(cat "$OUT/clock1.out")
# The second value, read through bluetoothd's client (bytes to text).
c2=$(read_at 0 | cut -d' ' -f3- | awk '{for (i = 1; i <= NF; i++) printf "%c", $i}')
check "--read-clock answers the time of each read: $c1, then $c2" \
  bash -c "[[ '$c1' =~ ^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$ && '$c2' > '$c1' ]]"
forget_dev
kill -INT "$ADV"
wait "$ADV"

# --- the adapter powered off mid-run ---------------------------------------------------------
"$BLEKIT" monitor -a hci0 >"$OUT/poweroff.out" 2>"$OUT/poweroff.err" &
MON=$!
wait_for 60 discovering hci0
set_powered hci0 false
wait_for 20 bash -c "! kill -0 $MON 2>/dev/null"
wait "$MON"
rc=$?
check "powered off mid-run: summary, then exit 1 with a message (exit $rc: $(cat "$OUT/poweroff.err"))" \
  bash -c "[[ $rc == 1 ]] && grep -q '^monitored ' '$OUT/poweroff.out' && grep -q 'powered off' '$OUT/poweroff.err'"
set_powered hci0 true
wait_for 20 powered hci0

# --- bluetoothd goes away mid-run ------------------------------------------------------------
"$BLEKIT" monitor -a hci0 --json >"$OUT/gone.out" 2>"$OUT/gone.err" &
MON=$!
wait_for 60 grep -q '"type":"start"' "$OUT/gone.out"
lab-bluetoothd stop >/dev/null 2>&1
wait_for 20 bash -c "! kill -0 $MON 2>/dev/null"
wait "$MON"
rc=$?
check "bluetoothd gone mid-run: summary, then exit 4 (exit $rc: $(cat "$OUT/gone.err"))" \
  bash -c "[[ $rc == 4 ]] && grep -q '\"type\":\"summary\"' '$OUT/gone.out' && grep -q bluetoothd '$OUT/gone.err'"
lab-bluetoothd start >/dev/null 2>&1

finish_suite
