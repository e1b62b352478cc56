#!/usr/bin/env bash
# Lab test of `blekit clone`: `blekit serve` stands up an original device on hci1, `blekit
# clone` copies it from hci0 (the same bluetoothd), the clone is served on hci1 in its place,
# and `explore --json` of the original and of the twin must show the same services,
# characteristics, descriptors, properties, readable values and read refusals. Runs inside the
# lab:
#
#   scripts/lab run --env BLEKIT=$PWD/.build/debug/blekit -- Tests/Lab/clone.sh
#
# The original has a readable value, a refused read (insufficient authorization: no pairing
# needed, where encryption would make bluetoothd 5.66 drop an unpaired link, lab-notes), a
# notify-only characteristic, descriptors (2901, 2904), and a 300-byte value (long reads).
# A second clone with --listen 3 records feb3's notifications (01 every second) into a cycle.
# Each check prints "ok" or "FAIL"; the last line is "N passed, M failed"; the status is 1 if
# any failed. Outputs are kept in $LAB_RESULTS/clone.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/clone
mkdir -p "$OUT"
HCI1=00:AA:01:01:00:01
DEV=/org/bluez/hci0/dev_00_AA_01_01_00_01
PY=/usr/bin/python3
LONG=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f363d444b525960676e757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e353c434a51585f666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d

# forget: removes hci1's device from hci0's bluetoothd, so the next explore scans and
# discovers its services afresh (not bluetoothd's cached copy of the other profile). Stopping
# serve leaves the link up (bluetoothd on hci1 keeps it without an application), so the
# device is disconnected first; then the object must be gone, or the next explore reads a
# tree that Service Changed is rebuilding.
forget() {
  busctl --system call org.bluez "$DEV" org.bluez.Device1 Disconnect >>"$OUT/forget.err" 2>&1
  busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o "$DEV" \
    >>"$OUT/forget.err" 2>&1
  local i
  for ((i = 0; i < 50; i++)); do
    busctl --system introspect org.bluez "$DEV" >/dev/null 2>&1 || return 0
    sleep 0.2
  done
  echo "forget: $DEV still there after 10 s" >>"$OUT/forget.err"
}
# explore_served NAME PROFILE: starts explore on hci0 (scanning: the emulated controller reports
# an advertiser only when its advertising switches on under a running scan), then serves
# PROFILE on hci1; explore's JSON in $OUT/NAME.explore, its status in RC; serve keeps running
# (pid SERVE_PID).
explore_served() {
  local name=$1 profile=$2
  "$BLEKIT" explore "$HCI1" -a hci0 --json --timeout 60 >"$OUT/$name.explore" \
    2>"$OUT/$name.explore.err" &
  local explore=$!
  wait_discovering hci0 30
  "$BLEKIT" serve "$profile" -a hci1 --json >"$OUT/$name.serve.jsonl" 2>"$OUT/$name.serve.err" &
  SERVE_PID=$!
  wait "$explore"
  RC=$?
}
stop_serve() {
  kill -TERM "$SERVE_PID" 2>/dev/null
  wait "$SERVE_PID"
}

cat >"$OUT/original.json" <<JSON
{
  "advertise": {"name": "blekit original", "services": ["180f"], "appearance": 833,
                "manufacturerData": {"ffff": "0102"}},
  "services": [
    {"uuid": "180f", "characteristics": [
      {"uuid": "2a19", "properties": ["read", "notify"], "value": {"uint8": 87},
       "notifier": {"every": 1, "value": {"uint8": 87}}, "description": "Battery"}]},
    {"uuid": "feb0", "characteristics": [
      {"uuid": "feb1", "properties": ["read", "write"], "value": "hello twin"},
      {"uuid": "feb2", "properties": ["read"], "readError": "insufficient-authorization"},
      {"uuid": "feb3", "properties": ["notify"], "notifier": {"every": 1, "value": {"hex": "01"}}},
      {"uuid": "feb4", "properties": ["read"], "value": {"hex": "$LONG"},
       "format": {"type": "opaque"}}]}
  ]
}
JSON

# --- the original, explored, then cloned ------------------------------------------------------
explore_served original "$OUT/original.json"
# The refused value makes explore exit 5 (a value not read: it needs the device's authorization).
[[ $RC == 5 ]] && grep -q "needs the device's authorization" "$OUT/original.explore.err"
status=$?
check_status "explore the original on hci1" "exit $RC: $(show original.explore.err)"
"$BLEKIT" clone "$HCI1" -a hci0 -o "$OUT/clone.json" --timeout 60 >"$OUT/clone.out" \
  2>"$OUT/clone.err"
RC=$?
[[ $RC == 0 && -s $OUT/clone.json && ! -s $OUT/clone.out ]]
status=$?
check_status "clone -o FILE: exit 0, the profile in FILE, nothing on standard output" \
  "exit $RC: $(show clone.err) $(show clone.out)"
"$BLEKIT" serve "$OUT/clone.json" --check >"$OUT/check.out" 2>"$OUT/check.err"
RC=$?
[[ $RC == 0 ]]
status=$?
check_status "serve --check accepts the clone" "exit $RC: $(show check.err)"
$PY - "$OUT/clone.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
chars = {c["uuid"]: c for s in p["services"] for c in s["characteristics"]}
ad = p["advertise"]
assert [s["uuid"] for s in p["services"]] == ["180f", "feb0"], p["services"]
assert chars["feb2"]["readError"] == "insufficient-authorization", chars["feb2"]
assert chars["feb1"]["value"] == {"text": "hello twin"}, chars["feb1"]
assert ad.get("manufacturerData") == {"ffff": "0102"}, ad
assert ad.get("name"), ad
assert any("1800" in n for n in p["notes"]) and any("1801" in n for n in p["notes"]), p["notes"]
PY
status=$?
check_status "the clone: both services, feb2's refusal, the advertised manufacturer data and name, notes on 1800/1801" \
  "$(show clone.json 800)"
"$BLEKIT" clone "$HCI1" -a hci0 --listen 3 --timeout 60 >"$OUT/clone-listen.json" \
  2>"$OUT/clone-listen.err"
RC=$?
[[ $RC == 0 ]] && $PY - "$OUT/clone-listen.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
chars = {c["uuid"]: c for s in p["services"] for c in s["characteristics"]}
notifier = chars["feb3"]["notifier"]
values = notifier["value"]["cycle"]
# feb3 notifies 01 every second while subscribed: 2 or 3 of them in 3 s, about 1 s apart.
assert 2 <= len(values) <= 4 and all(v == {"hex": "01"} for v in values), notifier
assert 0.5 <= notifier["every"] <= 1.5, notifier
PY
status=$?
check_status "clone --listen 3: feb3's notifications recorded into a replaying cycle" \
  "exit $RC: $(show clone-listen.err) $(show clone-listen.json 1500)"
stop_serve
forget

# --- the twin ----------------------------------------------------------------------------------
explore_served twin "$OUT/clone.json"
# The refused value makes explore exit 5 (a value not read: it needs the device's authorization).
[[ $RC == 5 ]] && grep -q "needs the device's authorization" "$OUT/twin.explore.err"
status=$?
check_status "explore the twin on hci1" "exit $RC: $(show twin.explore.err)"
stop_serve
$PY - "$OUT/original.explore" "$OUT/twin.explore" >"$OUT/compare.out" 2>&1 <<'PY'
import json, sys
SKIPPED_SERVICES = {"1800", "1801"}
SKIPPED_DESCRIPTORS = {"2900", "2902"}
def outline(path):
    tree = json.loads(open(path).read().splitlines()[0])
    result = []
    for s in tree["services"]:
        if s["shortUUID"] in SKIPPED_SERVICES:
            continue
        chars = []
        for c in s["characteristics"]:
            descs = [(d["shortUUID"], d["value"], (d["error"] or {}).get("name"))
                     for d in c["descriptors"] if d["shortUUID"] not in SKIPPED_DESCRIPTORS]
            chars.append((c["shortUUID"], sorted(c["flags"]), c["value"],
                          (c["error"] or {}).get("name"), descs))
        result.append((s["shortUUID"], s["primary"], chars))
    return result
original, twin = outline(sys.argv[1]), outline(sys.argv[2])
print("original:", original)
print("twin:    ", twin)
assert original == twin
# The tree is the one served: feb2 refused with NotAuthorized, feb4 300 bytes long.
chars = {c[0]: c for s in original for c in s[2]}
assert chars["feb2"][3] == "org.bluez.Error.NotAuthorized", chars["feb2"]
assert len(bytes.fromhex(chars["feb4"][2])) == 300, chars["feb4"]
PY
status=$?
check_status "explore --json of the original and the twin: same services, characteristics, descriptors, flags, values and refusals" \
  "$(tail -c 1200 "$OUT/compare.out" | tr '\n' ' ')"

finish_suite
