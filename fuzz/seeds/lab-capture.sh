#!/usr/bin/env bash
# Records the system bus while blekit talks to a real bluetoothd, for the fuzz targets' seeds.
# Runs inside the lab (one host, hci0 and hci1); blekit must be built first:
#
#   swift build --product blekit
#   flock /tmp/blekit-lab.lock scripts/lab run --timeout 400 -- fuzz/seeds/lab-capture.sh
#   fuzz/seeds/split-capture.py results/lab-*/bus.bin --into fuzz/corpus
#
# hci0 scans while hci1 starts `blekit advertise` (with manufacturer and service data, a
# readable characteristic and a pairing agent; without the service UUID, which would take the
# advertisement past 31 bytes), then hci0 explores, reads, receives, pairs and unpairs: InterfacesAdded/Removed, PropertiesChanged (RSSI, ManufacturerData, ServiceData),
# GetManagedObjects replies, Agent1 calls and GATT ReadValue/WriteValue/Acquire* all cross the
# bus. dbus-monitor writes every message in wire form, one after another, to bus.bin.
set -u
cd "${LAB_CHECKOUT:?run this inside scripts/lab}"
source Tests/Lab/common.sh
BLEKIT=$PWD/.build/debug/blekit
OUT=${LAB_RESULTS:?}
PEER=00:AA:01:01:00:01
READ_CHAR=8eaae4b3-b2e1-4d09-b847-f21676e24277

dbus-monitor --system --binary >/tmp/bus.bin 2>"$OUT/monitor.err" &
monitor=$!
sleep 1

step() {
  echo "# $*"
  "$@" >>"$OUT/steps.log" 2>&1
  echo "# exit $?"
}

"$BLEKIT" scan -a hci0 --timeout 10 >"$OUT/scan.out" 2>&1 &
scan=$!
wait_discovering hci0
"$BLEKIT" advertise -a hci1 --message "seed message" --manufacturer 0xFFFF:0102 \
  --service-data 180f:64 --no-service-uuid --read-value hello --pairable --timeout 200 \
  >"$OUT/advertise.out" 2>"$OUT/advertise.err" &
advertise=$!
wait "$scan"
echo "# scan: $(cat "$OUT/scan.out")"
step "$BLEKIT" explore -a hci0 "$PEER"
step "$BLEKIT" read -a hci0 "$PEER" "$READ_CHAR" --text
step "$BLEKIT" receive -a hci0 --from "$PEER" --count 1 --timeout 30
step "$BLEKIT" pair -a hci0 "$PEER" --capability DisplayYesNo --confirm auto --timeout 30
step "$BLEKIT" unpair -a hci0 "$PEER"
kill -INT "$advertise"
wait "$advertise"
sleep 1
kill "$monitor"
wait "$monitor" 2>/dev/null
cp /tmp/bus.bin "$OUT/bus.bin"
echo "# captured $(stat -c %s "$OUT/bus.bin") bytes"
