#!/usr/bin/env bash
# Lab test of passive scanning (AdvertisementMonitorManager1) and of what `blekit adapters`
# reports about advertising. Runs under bluetoothd --experimental, then restarts bluetoothd
# without it for the refusal:
#
#   scripts/lab run --experimental --env BLEKIT=$PWD/.build/debug/blekit -- Tests/Lab/passive.sh
#
# hci0 scans passively, hci1 advertises. The emulated controller reports an advertiser when
# its advertising or the scan switches on, so each advertisement starts after the monitor is
# active. Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/passive
mkdir -p "$OUT"
passed=0
failed=0
HCI1=00:AA:01:01:00:01
ID1=0102030405060708090a0b0c0d0e0f10
SERVICE=b5b2a3c4-7f1e-4c55-9d5e-7a0c1f2e3d41

ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

# advertise SECONDS ARGS...: blekit advertise on hci1 for a window (the transfer service's
# message is irrelevant here).
advertise() {
  local seconds=$1
  shift
  "$BLEKIT" advertise -a hci1 --message x --timeout "$seconds" "$@" >>"$OUT/advertise.log" 2>&1
}

# passive_scan NAME ARGS...: starts `blekit scan --passive` on hci0 in the background, JSON
# Lines to $OUT/NAME.json; waits until bluetoothd activated the monitor.
passive_scan() {
  local name=$1
  shift
  "$BLEKIT" scan -a hci0 --passive --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" &
  SCAN=$!
  # The scan returns from its start only once the monitor is active; give it that long.
  sleep 4
  prop /org/bluez/hci0 org.bluez.Adapter1 Discovering >"$OUT/$name.discovering"
}

# --- facts first: what bluetoothd offers with --experimental --------------------------------
busctl --system introspect org.bluez /org/bluez/hci0 >"$OUT/hci0-introspect.txt" 2>&1
check "bluetoothd -E offers AdvertisementMonitorManager1 on hci0" \
  grep -q "org.bluez.AdvertisementMonitorManager1" "$OUT/hci0-introspect.txt"
busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.AdvertisementMonitorManager1 \
  SupportedFeatures >"$OUT/monitor-features.txt" 2>&1
busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.AdvertisementMonitorManager1 \
  SupportedMonitorTypes >>"$OUT/monitor-features.txt" 2>&1
echo "# monitor manager: $(tr '\n' ' ' <"$OUT/monitor-features.txt")"

"$BLEKIT" adapters >"$OUT/adapters.txt" 2>&1
"$BLEKIT" adapters --json >"$OUT/adapters.json" 2>&1
echo "# adapters:"
sed 's/^/#   /' "$OUT/adapters.txt"
sed 's/^/#   /' "$OUT/adapters.json"
check "adapters names the advertising monitor as available (experimental)" \
  grep -q '"passiveScanning":true' "$OUT/adapters.json"
check "adapters --json reports the secondary channels and the maximum advertising length" \
  grep -q '"secondaryChannels":\[' "$OUT/adapters.json"

# --- passive scan filtered by company ID --------------------------------------------------
passive_scan company --company 0xFFFF --timeout 20
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1"
wait $SCAN
echo "# scan --passive --company 0xFFFF exited $?"
check "scan --passive --company 0xFFFF finds hci1's manufacturer data" \
  grep -q "\"address\":\"$HCI1\".*\"companyID\":65535" "$OUT/company.json"
check "scan --passive stayed passive (hci0 not discovering during the scan)" \
  grep -qx "boolean false" "$OUT/company.discovering"

# A company ID nobody advertises: nothing is reported.
passive_scan other-company --company 0x1234 --timeout 12
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1"
wait $SCAN
check "scan --passive --company 0x1234 reports nothing for 0xFFFF data" \
  test ! -s "$OUT/other-company.json"

# --- passive scan filtered by a 128-bit service UUID ---------------------------------------
passive_scan service --service "$SERVICE" --timeout 20
advertise 6 --no-service-uuid --service-data "$SERVICE:01"
advertise 6 --no-service-uuid --manufacturer "0xFFFF:01"
wait $SCAN
check "scan --passive --service finds the advertiser of that service (service data)" \
  grep -q "\"address\":\"$HCI1\".*\"uuid\":\"$SERVICE\"" "$OUT/service.json"

# No filter: the catch-all flags patterns.
passive_scan any --timeout 15
advertise 6 --no-service-uuid --manufacturer "0xFFFF:02"
wait $SCAN
check "scan --passive without filters finds hci1 (flags patterns)" \
  grep -q "\"address\":\"$HCI1\"" "$OUT/any.json"

# --- monitor --passive counts a FolkBears ID ----------------------------------------------
"$BLEKIT" monitor -a hci0 --passive --json --timeout 18 >"$OUT/monitor.json" \
  2>"$OUT/monitor.err" &
MON=$!
sleep 4
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1"
wait $MON
echo "# monitor --passive exited $?"
check "monitor --passive sees the FolkBears ID" \
  grep -q "\"id\":\"$ID1\"" "$OUT/monitor.json"

# --- without --experimental: one clear line, exit 15, no discovery -------------------------
sed -i 's/^LAB_BLUETOOTHD_EXPERIMENTAL=.*/LAB_BLUETOOTHD_EXPERIMENTAL=/' /run/lab/state
lab-bluetoothd restart >"$OUT/restart.log" 2>&1
busctl --system introspect org.bluez /org/bluez/hci0 >"$OUT/hci0-introspect-plain.txt" 2>&1
check "bluetoothd without -E has no AdvertisementMonitorManager1" \
  ! grep -q "org.bluez.AdvertisementMonitorManager1" "$OUT/hci0-introspect-plain.txt"
"$BLEKIT" adapters --json >"$OUT/adapters-plain.json" 2>&1
echo "# adapters without -E: $(cat "$OUT/adapters-plain.json")"
check "adapters says passive scanning is unavailable without -E" \
  grep -q '"passiveScanning":false' "$OUT/adapters-plain.json"
"$BLEKIT" scan -a hci0 --passive --timeout 5 >"$OUT/refused.out" 2>"$OUT/refused.err"
status=$?
echo "# scan --passive without -E: exit $status, stderr: $(cat "$OUT/refused.err")"
check "scan --passive without -E exits 15" test "$status" -eq 15
check "... with one line on stderr naming --experimental" \
  test "$(wc -l <"$OUT/refused.err")" -eq 1 -a "$(grep -c -- --experimental "$OUT/refused.err")" -eq 1
check "... and prints nothing, having started no discovery" \
  test ! -s "$OUT/refused.out" -a "$(prop /org/bluez/hci0 org.bluez.Adapter1 Discovering)" = "boolean false"
"$BLEKIT" monitor -a hci0 --passive --timeout 5 >"$OUT/refused-monitor.out" \
  2>"$OUT/refused-monitor.err"
check "monitor --passive without -E exits 15 too" test "$?" -eq 15

echo "$passed passed, $failed failed"
((failed == 0))
