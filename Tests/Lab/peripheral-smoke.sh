#!/usr/bin/env bash
# Lab test of `blekit advertise` against an independent central (peripheral-central.py, BlueZ's
# D-Bus API from Python) on the other controller. Runs inside the lab:
#
#   scripts/lab run -- Tests/Lab/peripheral-smoke.sh [BLEKIT]
#
# PERIPHERAL_SMOKE_QUICK=1 skips the 256 KiB transfers. BLEKIT defaults to $BLEKIT or .build-server/bin/blekit (a copy of the built binary inside the
# checkout, which the VM sees). Each check prints "ok" or "FAIL"; exit 1 if any failed.
set -u
# Job control on: without it, background jobs start with SIGINT ignored and the SIGINT check
# below would test nothing.
set -m
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build-server/bin/blekit}}
CENTRAL=(/usr/bin/python3 "$PWD/Tests/Lab/peripheral-central.py")
OUT=${LAB_RESULTS:-/tmp}/peripheral
mkdir -p "$OUT"

# Starts `blekit advertise ARGS...` on hci1 in the background; sets ADV_PID.
start_advertise() {
  local name=$1
  shift
  "$BLEKIT" advertise -a hci1 "$@" >"$OUT/$name.adv.out" 2>"$OUT/$name.adv.err" &
  ADV_PID=$!
  sleep 1.5
}

# Waits for the advertiser to exit (at most 30 s); sets ADV_RC.
wait_advertise() {
  local waited=0
  while kill -0 "$ADV_PID" 2>/dev/null && ((waited < 300)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$ADV_PID" 2>/dev/null; then
    kill -TERM "$ADV_PID"
  fi
  wait "$ADV_PID"
  ADV_RC=$?
}

# Objects still exported by blekit processes (none expected once they exited) and
# bluetoothd's registered applications/advertisements, from its log.
registered_count() {
  busctl --system tree org.bluez 2>/dev/null | grep -c blekit || true
}

# transfer NAME FRAMING MODE MESSAGE-FILE: one --once transfer, compared byte for byte.
transfer() {
  local name=$1 framing=$2 mode=$3 file=$4
  # The central scans first, the advertisement comes second: the emulator reports an
  # advertiser only when advertising or scanning switches on, and a report that arrives while
  # the kernel is still starting discovery is dropped (seen in btmon: report, then "Start
  # Service Discovery" complete). An advertisement switched on under a running scan is
  # reported reliably.
  timeout 240 "${CENTRAL[@]}" --framing "$framing" --mode "$mode" --reply "reply-$name" \
    --out "$OUT/$name.received" 2>"$OUT/$name.central.err" &
  local central=$!
  sleep 3
  start_advertise "$name" --file "$file" --once
  wait "$central"
  local crc=$?
  wait_advertise
  if ((crc == 0)) && cmp -s "$file" "$OUT/$name.received"; then
    ok "$name: $(stat -c %s "$file") bytes ($framing, client $mode) $(tail -n1 "$OUT/$name.central.err")"
  elif ((crc == 0)) && [[ $framing == plain ]] && same_chunks "$file" "$OUT/$name.received"; then
    # The plain protocol has no sequence numbers: on stock BlueZ 5.66 (EATT) chunks can
    # arrive out of order. Every chunk arrived; only their order differs.
    ok "$name: every chunk arrived but REORDERED (plain protocol over EATT; expected)"
  else
    fail "$name: central exit $crc; $(tail -n2 "$OUT/$name.central.err" | tr '\n' ' ')"
  fi
  if ((ADV_RC == 0)) && grep -qx "reply-$name" "$OUT/$name.adv.out"; then
    ok "$name: advertise printed the reply and exited 0"
  else
    fail "$name: advertise exit $ADV_RC, stdout [$(head -c 200 "$OUT/$name.adv.out")]" \
      "stderr [$(head -c 300 "$OUT/$name.adv.err")]"
  fi
}

printf 'hello from blekit' >"$OUT/short.txt"
head -c 3000 /dev/urandom | base64 -w0 >"$OUT/3k.txt"
head -c 196608 /dev/urandom | base64 -w0 >"$OUT/256k.txt"

transfer short-plain plain notify "$OUT/short.txt"
transfer short-acquire plain acquire "$OUT/short.txt"
transfer 3k-sequenced sequenced notify "$OUT/3k.txt"
if [[ -z ${PERIPHERAL_SMOKE_QUICK:-} ]]; then
  transfer 256k-plain plain acquire "$OUT/256k.txt"
  transfer 256k-sequenced sequenced acquire "$OUT/256k.txt"
fi

# Security: another bus client calling the exported objects is refused.
start_advertise security -m secret
owner=$(/usr/bin/python3 - "$ADV_PID" <<'PY'
import sys, dbus
bus = dbus.SystemBus()
daemon = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"),
                        "org.freedesktop.DBus")
for name in daemon.ListNames():
    if name.startswith(":"):
        try:
            if daemon.GetConnectionUnixProcessID(name) == int(sys.argv[1]):
                print(name)
        except dbus.DBusException:
            pass
PY
)
echo "advertise's bus name: ${owner:-none}"
char=/org/blekit/app0/service0/char0
# The calls below need advertise's objects on the bus, which start_advertise's pause does not
# promise: in one Debian 13 run at load 13, WriteValue met no object yet (libdbus's "doesn't
# exist") and ReadValue, a moment later, was refused as it should be. Wait for the export.
wait_for 30 bash -c "busctl --system introspect '$owner' '$char' org.bluez.GattCharacteristic1 \
  2>/dev/null | grep -q WriteValue" || echo "# $char not exported by ${owner:-none} after 30 s"
for call in \
  "WriteValue aya{sv} 2 104 105 0" \
  "ReadValue a{sv} 0" \
  "StartNotify" \
  "AcquireNotify a{sv} 0"; do
  read -r member signature args <<<"$call"
  reply=$(busctl --system call "$owner" "$char" org.bluez.GattCharacteristic1 "$member" \
    ${signature:+$signature} $args 2>&1)
  if grep -q "NotAuthorized\|only bluetoothd" <<<"$reply"; then
    ok "security: $member from another client refused"
  else
    fail "security: $member from another client answered: $reply"
  fi
done
reply=$(busctl --system call "$owner" /org/blekit/advertisement0 org.bluez.LEAdvertisement1 \
  Release 2>&1)
if grep -q "NotAuthorized\|only bluetoothd" <<<"$reply"; then
  ok "security: Release from another client refused"
else
  fail "security: Release answered: $reply"
fi
reply=$(busctl --system set-property "$owner" "$char" org.bluez.GattCharacteristic1 Handle q 7 2>&1)
if grep -q "NotAuthorized\|only bluetoothd" <<<"$reply"; then
  ok "security: setting Handle from another client refused"
else
  fail "security: setting Handle answered: $reply"
fi

# SIGTERM and SIGINT leave nothing registered.
for sig in TERM INT; do
  kill -"$sig" "$ADV_PID" 2>/dev/null
  wait_advertise
  [[ $sig == TERM ]] && expected=143 || expected=130
  if ((ADV_RC == expected)); then ok "SIG$sig: exit $ADV_RC"; else fail "SIG$sig: exit $ADV_RC"; fi
  active=$(busctl --system get-property org.bluez /org/bluez/hci1 \
    org.bluez.LEAdvertisingManager1 ActiveInstances 2>&1)
  if [[ $active == "y 0" ]]; then
    ok "SIG$sig: no advertisement left (ActiveInstances $active)"
  else
    fail "SIG$sig: ActiveInstances $active"
  fi
  [[ $sig == TERM ]] && start_advertise sigint -m bye
done

# Bad input: each a one-line error and its own exit status.
expect_status() {
  local want=$1 what=$2
  shift 2
  local err
  err=$("$BLEKIT" "$@" 2>&1 >/dev/null)
  local rc=$?
  # One line; a usage error (2) adds its "Try 'blekit advertise --help'." hint.
  local lines=1
  ((want == 2)) && lines=2
  if ((rc == want)) && [[ $(wc -l <<<"$err") -eq $lines ]]; then
    ok "$what: exit $rc, \"$err\""
  else
    fail "$what: exit $rc (want $want), \"$err\""
  fi
}
expect_status 3 "unknown adapter" advertise -a hci9 -m x
expect_status 2 "no message" advertise -a hci1
if command -v lab-bluetoothd >/dev/null; then
  lab-bluetoothd stop
  expect_status 4 "bluetoothd not running" advertise -a hci1 -m x
  lab-bluetoothd start && lab-bluetoothd wait >/dev/null 2>&1
fi

# Its own last lines, not finish_suite's "N passed, M failed" (run-all counts the ok and FAIL
# lines, not these).
if ((failed > 0)); then
  echo "peripheral-smoke: $failed failed"
  exit 1
fi
echo "peripheral-smoke: all passed"
