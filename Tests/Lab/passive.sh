#!/usr/bin/env bash
# Lab test of passive scanning (AdvertisementMonitorManager1) and of what `blekit adapters`
# reports about advertising. Runs under bluetoothd --experimental, then restarts bluetoothd
# without it for the refusal:
#
#   scripts/lab run --experimental --env BLEKIT=$PWD/.build/debug/blekit -- Tests/Lab/passive.sh
#
# hci0 scans passively, hci1 advertises. The emulated controller reports an advertiser when
# its advertising or the scan switches on, so each advertisement starts after the monitor is
# active. Facts seen (BlueZ 5.66, Linux 6.1, btvirt): DeviceFound comes for a match with
# RSSI 127; bluetoothd 5.66 wraps its Add Adv Patterns Monitor length at 8 or more patterns
# (kernel: Invalid Parameters) and then aborts, hence 7 patterns per monitor; LE-only btvirt
# reports MaxAdvLen 31 and no secondary channels with -E, dual-mode btvirt 251 and
# 1M,2M,Coded; without -E no MaxAdvLen, SecondaryChannels, PowerState; MinInterval,
# MaxInterval and TxPower reach the kernel only with -E. BlueZ 5.82 (Debian 13) reports
# MaxAdvLen and reads those three without -E. Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/passive
mkdir -p "$OUT"
HCI1=00:AA:01:01:00:01
ID1=0102030405060708090a0b0c0d0e0f10
SERVICE=b5b2a3c4-7f1e-4c55-9d5e-7a0c1f2e3d41

absent() { ! grep -q "$@"; } # absent PATTERN FILE

# advertise SECONDS ARGS...: blekit advertise on hci1 for a window (the transfer service's
# message is irrelevant here).
advertise() {
  local seconds=$1
  shift
  "$BLEKIT" advertise -a hci1 --message x --timeout "$seconds" "$@" >>"$OUT/advertise.log" 2>&1
}

# bluetoothd's log (debug): it says when it activates a monitor.
BLUETOOTHD_LOG=$(source /run/lab/state && echo "$LAB_BLUETOOTHD_LOG")
activations() { grep -c "Calling Activate() on Adv Monitor" "$BLUETOOTHD_LOG"; }
activated_since() { (($(activations) > $1)); }

# passive_scan NAME ARGS...: starts `blekit scan --passive` on hci0 in the background, JSON
# Lines to $OUT/NAME.json, and waits until bluetoothd activated its monitor (the scan's start
# returns then). Under load a fixed wait was not enough: an advertisement that started before
# the monitor was missed. stop_scan ends it with SIGINT, as Ctrl-C does.
passive_scan() {
  local name=$1 before
  shift
  before=$(activations)
  "$BLEKIT" scan -a hci0 --passive --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.err" &
  SCAN=$!
  wait_for 60 activated_since "$before" || echo "# $name: no monitor activated within 60 s"
  sleep 1
}
stop_scan() {
  kill -INT "$SCAN" 2>/dev/null
  wait "$SCAN"
  echo "# scan $1 ended with exit $?"
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
passive_scan company --company 0xFFFF
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1" &
ADV=$!
sleep 3
prop /org/bluez/hci0 org.bluez.Adapter1 Discovering >"$OUT/company.discovering"
wait $ADV
stop_scan company
check "scan --passive --company 0xFFFF finds hci1's manufacturer data" \
  grep -q "\"address\":\"$HCI1\".*\"companyID\":65535" "$OUT/company.json"
check "scan --passive stayed passive (hci0 not discovering during the scan)" \
  grep -qx "boolean false" "$OUT/company.discovering"

# A company ID nobody advertises: nothing is reported.
passive_scan other-company --company 0x1234
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1"
stop_scan other-company
check "scan --passive --company 0x1234 reports nothing for 0xFFFF data" \
  test ! -s "$OUT/other-company.json"

# --- passive scan filtered by a 128-bit service UUID ---------------------------------------
passive_scan service --service "$SERVICE"
advertise 6 --no-service-uuid --service-data "$SERVICE:01"
stop_scan service
check "scan --passive --service finds the advertiser of that service (service data)" \
  grep -qi "\"address\":\"$HCI1\".*\"uuid\":\"$SERVICE\"" "$OUT/service.json"
# The transfer service's UUID in the complete 128-bit list (advertise's default).
TRANSFER=e20a39f4-73f5-4bc4-a12f-17d1ad07a961
passive_scan service-list --service "$TRANSFER"
advertise 6
stop_scan service-list
# The transfer UUID anywhere in the list: bluetoothd 5.82 keeps the UUID of the service data
# heard from the same device before (its UUIDs property grows), so it need not come first.
check "scan --passive --service finds the advertiser of that service (UUID list)" \
  grep -qi "\"address\":\"$HCI1\".*\"serviceUUIDs\":\[[^]]*\"$TRANSFER\"" "$OUT/service-list.json"

# No filter: the catch-all flags patterns.
passive_scan any
advertise 6 --no-service-uuid --manufacturer "0xFFFF:02"
stop_scan any
check "scan --passive without filters finds hci1 (16 flags patterns in 3 monitors)" \
  grep -q "\"address\":\"$HCI1\"" "$OUT/any.json"

# --- monitor --passive counts a FolkBears ID ----------------------------------------------
"$BLEKIT" monitor -a hci0 --passive --json >"$OUT/monitor.json" 2>"$OUT/monitor.err" &
MON=$!
# Its JSON start line comes once the monitor is active.
wait_for 60 grep -q '"type":"start"' "$OUT/monitor.json"
advertise 6 --no-service-uuid --manufacturer "0xFFFF:0210$ID1"
kill -INT "$MON"
wait $MON
echo "# monitor --passive exited $? after Ctrl-C"
check "monitor --passive sees the FolkBears ID" \
  grep -q "\"id\":\"$ID1\"" "$OUT/monitor.json"

# --- the size check's limit on the lab's LE-only controllers ----------------------------------
# 40 bytes of manufacturer data: 3 + 44 = 47 bytes of advertising data.
BIG=$(printf '%080d' 0)
advertise 5 --no-service-uuid --manufacturer "0xFFFF:$BIG"
status=$?
tail -n1 "$OUT/advertise.log" >"$OUT/too-large.err"
echo "# 47-byte advertisement on hci1 (-E): exit $status, $(cat "$OUT/too-large.err")"
check "hci1 reports MaxAdvLen 31 with -E (LE-only btvirt: no extended advertising)" \
  grep -q '"name":"hci1".*"maxAdvertisingLength":31' "$OUT/adapters.json"
check "... so the 47-byte advertisement exits 9 with the breakdown, before bluetoothd is asked" \
  test "$status" -eq 9 -a "$(grep -c "47 bytes, legacy limit is 31: flags 3, manufacturer data 0xFFFF 44" "$OUT/too-large.err")" -eq 1

# --- intervals and TX power: requests; whether bluetoothd passes them on is read from btmon's
# capture afterwards (mgmt Add Extended Advertising Parameters), not checked here.
before=$(wc -l <"$OUT/advertise.log")
advertise 4 --no-service-uuid --min-interval 200 --max-interval 250 --tx-power -6
status=$?
check "advertise --min-interval 200 --max-interval 250 --tx-power -6 is accepted (-E)" \
  test "$status" -eq 0 -o "$status" -eq 6
# With -E bluetoothd exposes SupportedFeatures and reads the three requests: no warning that
# it needs --experimental.
check "... with no warning naming --experimental (LEAdvertisingManager1 has SupportedFeatures)" \
  absent -- "--experimental" <(tail -n +"$((before + 1))" "$OUT/advertise.log")

# --- extended advertising: dual-mode 5.2 controllers (a second btvirt, its own air) ---------
# btvirt without -L gives controllers with extended advertising; bluetoothd takes them as
# hci2 and hci3. They share an air with each other only.
btvirt -l2 </dev/null >"$OUT/btvirt-dual.log" 2>&1 &
DUAL=$!
dual_powered() {
  [[ $(prop /org/bluez/hci2 org.bluez.Adapter1 Powered) == "boolean true" &&
    $(prop /org/bluez/hci3 org.bluez.Adapter1 Powered) == "boolean true" ]]
}
if wait_for 60 dual_powered; then
  "$BLEKIT" adapters >"$OUT/adapters-dual.txt" 2>&1
  "$BLEKIT" adapters --json -a hci3 >"$OUT/adapters-dual.json" 2>&1
  echo "# adapters with dual-mode controllers:"
  sed 's/^/#   /' "$OUT/adapters-dual.txt" "$OUT/adapters-dual.json"
  check "adapters reports hci3's secondary channels (extended advertising)" \
    grep -q '"secondaryChannels":\["1M"' "$OUT/adapters-dual.json"
  limit=$(grep -o '"advertisingLimit":[0-9]*' "$OUT/adapters-dual.json" | cut -d: -f2)
  echo "# hci3: advertising limit ${limit:-?} bytes"
  # One 44-byte field: within hci3's MaxAdvLen, but bluetoothd 5.66 builds at most 31 bytes
  # per field (and answers only org.bluez.Error.Failed): blekit says so first.
  "$BLEKIT" advertise -a hci3 --message x --timeout 3 --no-service-uuid \
    --manufacturer "0xFFFF:$BIG" >"$OUT/extended-field.log" 2>&1
  status=$?
  echo "# advertise -a hci3, one 44-byte field: exit $status; $(tail -n1 "$OUT/extended-field.log")"
  check "a 44-byte field on hci3 exits 9: bluetoothd builds at most 31 bytes per field" \
    test "$status" -eq 9 -a "$(grep -c "at most 31 per field" "$OUT/extended-field.log")" -eq 1
  # 55 bytes in two fields, on the 1M secondary channel.
  DATA1=$(printf '%048d' 1)
  DATA2=$(printf '%040d' 2)
  "$BLEKIT" scan -a hci2 --json >"$OUT/extended.json" 2>"$OUT/extended.err" &
  SCAN=$!
  wait_discovering hci2 30
  "$BLEKIT" advertise -a hci3 --message x --timeout 8 --no-service-uuid \
    --secondary-channel 1M --manufacturer "0xFFFF:$DATA1" --manufacturer "0x1234:$DATA2" \
    >"$OUT/extended-advertise.log" 2>&1
  status=$?
  echo "# advertise -a hci3 --secondary-channel 1M, 55 bytes: exit $status; $(tail -n1 "$OUT/extended-advertise.log")"
  stop_scan extended
  # Open (issue 19): bluetoothd 5.66 answers this registration with "Failed to register
  # advertisement" (exit 8) in the lab; the cause is not found yet, so it is reported, not
  # checked.
  echo "# extended 55-byte registration: exit $status (0 or 6 expected once it works)"
  grep -q "\"data\":\"$DATA1\"" "$OUT/extended.json" && echo "# hci2 received the 55 bytes"
else
  fail "the dual-mode controllers hci2 and hci3 did not come up (see btvirt-dual.log)"
fi
kill "$DUAL" 2>/dev/null

# --- without --experimental: one clear line, exit 15, no discovery -------------------------
sed -i 's/^LAB_BLUETOOTHD_EXPERIMENTAL=.*/LAB_BLUETOOTHD_EXPERIMENTAL=/' /run/lab/state
lab-bluetoothd restart >"$OUT/restart.log" 2>&1
busctl --system introspect org.bluez /org/bluez/hci0 >"$OUT/hci0-introspect-plain.txt" 2>&1
check "bluetoothd without -E has no AdvertisementMonitorManager1" \
  absent "org.bluez.AdvertisementMonitorManager1" "$OUT/hci0-introspect-plain.txt"
"$BLEKIT" adapters --json >"$OUT/adapters-plain.json" 2>&1
echo "# adapters without -E: $(cat "$OUT/adapters-plain.json")"
check "adapters says passive scanning is unavailable without -E" \
  grep -q '"passiveScanning":false' "$OUT/adapters-plain.json"
if [[ ${LAB_DEBIAN:-12} == 13 ]]; then
  # BlueZ 5.82 exposes SupportedCapabilities without -E (5.66 marks it experimental).
  check "without -E bluetoothd 5.82 still reports MaxAdvLen (31 on LE-only btvirt)" \
    grep -q '"name":"hci1".*"maxAdvertisingLength":31,"advertisingLimit":31' "$OUT/adapters-plain.json"
else
  check "without -E no MaxAdvLen is reported: the size check falls back to 31" \
    grep -q '"name":"hci1".*"maxAdvertisingLength":null,"advertisingLimit":31' "$OUT/adapters-plain.json"
fi
advertise 5 --no-service-uuid --manufacturer "0xFFFF:$BIG"
status=$?
tail -n1 "$OUT/advertise.log" >"$OUT/too-large-plain.err"
check "... and the 47-byte advertisement exits 9 with the same breakdown" \
  test "$status" -eq 9 -a "$(grep -c "47 bytes, legacy limit is 31" "$OUT/too-large-plain.err")" -eq 1
before=$(wc -l <"$OUT/advertise.log")
advertise 4 --no-service-uuid --min-interval 200 --max-interval 250 --tx-power -6
echo "# advertise with intervals and TX power without -E: exit $?;" \
  "$(tail -n +"$((before + 1))" "$OUT/advertise.log" | grep warning | tr '\n' ' ')"
warned=$(tail -n +"$((before + 1))" "$OUT/advertise.log" | grep -c "only with --experimental")
if [[ ${LAB_DEBIAN:-12} == 13 ]]; then
  # BlueZ 5.82 exposes SupportedFeatures and reads TxPower and the intervals without -E.
  check "without -E, bluetoothd 5.82 reads TX power and intervals: no --experimental warning" \
    test "$warned" -eq 0
else
  check "without -E, advertise warns that bluetoothd 5.66 ignores TX power and intervals" \
    test "$warned" -eq 1
fi
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

finish_suite
