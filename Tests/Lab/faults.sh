#!/usr/bin/env bash
# Lab test of blekit under faults (issue 5), in one boot: bluetoothd restarted under a running
# `scan --json` and under `advertise`, and killed (SIGKILL) under `advertise --pairable`, which
# then gets SIGHUP; the adapter powered off under `advertise`; `receive`
# interrupted (SIGINT) mid-transfer, which must still call Device1.Disconnect; `advertise`
# killed mid-transfer; and a soak of 12 receives from one long-running `advertise` whose file
# descriptors, bus match rules and exported objects must not grow; last, the system bus
# (dbus-daemon) restarted under `advertise`, `scan`, `monitor` and `receive` (issue 17), after
# the adapters were removed (btvirt, their owner, killed) under the same. Runs inside the lab:
#
#   scripts/lab run --env BLEKIT=$PWD/.build/debug/blekit --timeout 900 -- Tests/Lab/faults.sh
#
# Each check prints "ok" or "FAIL"; the last line is "N passed, M failed"; exit 1 on failure.
# Outputs are kept in $LAB_RESULTS/faults.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${1:-${BLEKIT:-$PWD/.build/debug/blekit}}
OUT=${LAB_RESULTS:-/tmp}/faults
mkdir -p "$OUT"
# check DESCRIPTION EXPRESSION: this suite's own check, unlike common.sh's (which runs a
# command): it evals a shell expression, and FAIL says the description only.
check() { if eval "$2"; then ok "$1"; else fail "$1"; fi; }
HCI1_ADDR=00:AA:01:01:00:01
HCI1_DEV=/org/bluez/hci0/dev_00_AA_01_01_00_01

active_instances() {
  busctl --system call org.bluez /org/bluez/hci1 org.freedesktop.DBus.Properties Get ss \
    org.bluez.LEAdvertisingManager1 ActiveInstances 2>/dev/null | awk '{print $NF}'
}
instances_are() { [[ $(active_instances) == "$1" ]]; }
# unregistrations: how many UnregisterAdvertisement calls bluetoothd has logged (it runs with -d).
unregistrations() { grep -c "unregister_advertisement() UnregisterAdvertisement" \
  "${LAB_BLUETOOTHD_LOG:-/dev/null}"; }
discovering() {
  busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Discovering \
    2>/dev/null | grep -q true
}
connected() {
  busctl --system get-property org.bluez "$HCI1_DEV" org.bluez.Device1 Connected 2>/dev/null |
    grep -q true
}
subscribed() {
  busctl --system call org.bluez / org.freedesktop.DBus.ObjectManager GetManagedObjects \
    2>/dev/null | grep -qE '"(NotifyAcquired|Notifying)" (v )?b true'
}
powered() {
  busctl --system get-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Powered \
    2>/dev/null | grep -q true
}
# stop_pid PID: SIGTERM, then waits (bounded) and sets STATUS.
stop_pid() {
  kill -TERM "$1" 2>/dev/null
  local n=100
  while kill -0 "$1" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  STATUS=$?
}
# wait_exit PID SECONDS: waits for PID to exit by itself; sets STATUS (255 when it did not).
wait_exit() {
  local n=$(($2 * 10))
  while kill -0 "$1" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    STATUS=255
    stop_pid "$1"
    STATUS=255
  else
    wait "$1"
    STATUS=$?
  fi
}
# power_off_under WHAT PID ADAPTER ERRFILE: powers ADAPTER off under the running command PID
# and checks that it exits 1 saying so on stderr (ERRFILE).
power_off_under() {
  local what=$1 pid=$2 adapter=$3 err=$4
  busctl --system set-property org.bluez "/org/bluez/$adapter" org.bluez.Adapter1 Powered b false
  wait_exit "$pid" 40
  check "power-off: $what exits 1 (exit $STATUS)" "((STATUS == 1))"
  check "power-off: $what's stderr says the adapter was powered off" \
    "grep -q '$adapter was powered off' $err"
  echo "# stderr: $(head -c 300 "$err" | tr '\n' ' ')"
}
# power_on ADAPTER: powers it on again and waits (bounded) until bluetoothd says so.
power_on() {
  busctl --system set-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Powered b true
  wait_for 20 powered "$1" || echo "# $1 not powered again after 20 s"
}
# receive NAME [ARGS...]: one receive on hci0; sets RC.
receive() {
  local name=$1
  shift
  "$BLEKIT" receive -a hci0 --timeout 60 "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  RC=$?
}

echo "# blekit: $BLEKIT"

# --- 1. bluetoothd restarts under scan --json and advertise ---------------------------------
"$BLEKIT" scan -a hci0 --json >"$OUT/scan.out" 2>"$OUT/scan.err" &
scan=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
"$BLEKIT" advertise -a hci1 -m "after restart" --timeout 600 \
  >"$OUT/adv-restart.out" 2>"$OUT/adv-restart.err" &
adv=$!
seen_in_scan() { tail -n +"$1" "$OUT/scan.out" | grep -q "$HCI1_ADDR"; }
check "scan: reports the advertiser before the restart" "wait_for 30 seen_in_scan 1"
lines=$(wc -l <"$OUT/scan.out")
start=$SECONDS
lab-bluetoothd restart >"$OUT/restart1.log" 2>&1
echo "# bluetoothd restarted in $((SECONDS - start)) s"
check "scan: reports the advertiser again after the restart" \
  "wait_for 40 seen_in_scan $((lines + 1))"
check "scan: still running after the restart" "kill -0 $scan"
check "scan: stderr notes the pause and the resumption" \
  "grep -q 'scan paused' $OUT/scan.err && grep -q 'scan resumed' $OUT/scan.err"
check "advertise: still running after the restart" "kill -0 $adv"
check "advertise: stderr says it registered again" \
  "wait_for 20 grep -q 'registered again' $OUT/adv-restart.err"
check "advertise: one advertisement active with the new bluetoothd" "wait_for 10 instances_are 1"
receive after-restart --from "$HCI1_ADDR"
check "receive after the restart: exit 0 and the message (exit $RC)" \
  "((RC == 0)) && grep -qx 'after restart' $OUT/after-restart.out"
((RC == 0)) || echo "# receive stderr: $(tail -c 400 "$OUT/after-restart.err" | tr '\r\n' '  ')"
stop_pid "$scan"
check "scan: SIGINT/SIGTERM ends it (exit $STATUS)" "((STATUS == 143 || STATUS == 130 || STATUS == 0))"
stop_pid "$adv"
check "advertise: SIGTERM after the restart exits 143 (exit $STATUS)" "((STATUS == 143))"
check "advertise: nothing left registered after SIGTERM" "wait_for 10 instances_are 0"

# --- 1b. bluetoothd KILLED (SIGKILL: no goodbye on the bus but its name vanishing) under
# advertise --pairable: the advertisement and the agent are registered again with the next
# bluetoothd. Then SIGHUP (a closed terminal) ends advertise like SIGTERM: it unregisters first
# (bluetoothd logs the UnregisterAdvertisement call) and exits 129. The shell would also say 129
# for a process killed by SIGHUP's default action, hence the log check.
"$BLEKIT" advertise -a hci1 -m "pairable" --pairable --confirm auto --timeout 300 \
  >"$OUT/adv-agent.out" 2>"$OUT/adv-agent.err" &
adv=$!
wait_for 20 instances_are 1 || echo "# advertisement not active after 20 s"
bluez_gone() { ! busctl --system status org.bluez >/dev/null 2>&1; }
kill -KILL "$(pidof bluetoothd)"
wait_for 10 bluez_gone || echo "# org.bluez still owned 10 s after SIGKILL"
lab-bluetoothd start >"$OUT/restart2.log" 2>&1
lab-bluetoothd wait >>"$OUT/restart2.log" 2>&1
check "bluetoothd SIGKILL: advertise --pairable says the pairing agent registered again" \
  "wait_for 30 grep -q 'pairing agent registered again' $OUT/adv-agent.err"
check "bluetoothd SIGKILL: advertise says it registered again" \
  "wait_for 20 grep -q 'advertisement registered again' $OUT/adv-agent.err"
check "bluetoothd SIGKILL: advertise still running, one advertisement active" \
  "kill -0 $adv && wait_for 10 instances_are 1"
unregistered=$(unregistrations)
kill -HUP "$adv"
wait_exit "$adv" 15
check "advertise: SIGHUP exits 129 (exit $STATUS)" "((STATUS == 129))"
check "advertise: SIGHUP unregistered the advertisement first (bluetoothd's log)" \
  "(($(unregistrations) > unregistered))"
echo "# stderr: $(tail -n 3 "$OUT/adv-agent.err" | tr '\n' ' ')"

# --- 2. the adapter powered off under advertise --------------------------------------------
"$BLEKIT" advertise -a hci1 -m "power" --timeout 300 >"$OUT/adv-power.out" 2>"$OUT/adv-power.err" &
adv=$!
wait_for 20 instances_are 1 || echo "# advertisement not active after 20 s"
power_off_under advertise "$adv" hci1 "$OUT/adv-power.err"
check "power-off: nothing left registered (ActiveInstances $(active_instances))" \
  "instances_are 0"
power_on hci1

# --- 2b. the adapter powered off under scan -------------------------------------------------
"$BLEKIT" scan -a hci0 >"$OUT/scan-power.out" 2>"$OUT/scan-power.err" &
scan=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
power_off_under scan "$scan" hci0 "$OUT/scan-power.err"
power_on hci0

# --- 3. soak: 12 receives from one long-running advertise ----------------------------------
# A scan runs before the advertisement switches on, so that hci0 hears it (the emulator reports
# an advertiser only when it switches on, docs/lab.md); then every receive names the peer with
# --from, which connects to the known address without scanning: each disconnect switches the
# advertisement on again while no one scans.
"$BLEKIT" scan -a hci0 --json >"$OUT/soak-scan.out" 2>"$OUT/soak-scan.err" &
scan=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
"$BLEKIT" advertise -a hci1 -m "soak" --timeout 800 >"$OUT/adv-soak.out" 2>"$OUT/adv-soak.err" &
adv=$!
wait_for 20 instances_are 1 || echo "# advertisement not active after 20 s"
check "soak: the scan heard the advertiser" "wait_for 30 grep -q $HCI1_ADDR $OUT/soak-scan.out"
stop_pid "$scan"
unique=
for name in $(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus \
  org.freedesktop.DBus ListNames | grep -oE '":1\.[0-9]+"' | tr -d '"'); do
  pid=$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
    GetConnectionUnixProcessID s "$name" 2>/dev/null | awk '{print $NF}')
  if [[ $pid == "$adv" ]]; then unique=$name; fi
done
echo "# advertise pid $adv, bus name ${unique:-?}"
fds() { ls "/proc/$adv/fd" | wc -l; }
matches() {
  busctl --system call org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.Debug.Stats GetConnectionStats s "$unique" 2>/dev/null |
    grep -oE '"MatchRules" u [0-9]+' | awk '{print $NF}'
}
objects() { busctl --system tree "$unique" 2>/dev/null | grep -c '/'; }
# 12 receives: a leak per receive shows as growth over the 10 after the baseline (the hour-long
# run with bluetoothd restarts is scripts/soak, outside CI).
soak_n=12
soak_ok=0
for i in $(seq 1 $soak_n); do
  receive "soak-$i" --from "$HCI1_ADDR"
  if ((RC == 0)) && grep -qx soak "$OUT/soak-$i.out"; then soak_ok=$((soak_ok + 1)); fi
  sleep 0.5
  if ((i == 2)); then fd2=$(fds); m2=$(matches); o2=$(objects); fi
done
sleep 1
fdn=$(fds); mn=$(matches); on=$(objects)
echo "# after receive 2: fds $fd2, match rules ${m2:-n/a}, objects $o2;" \
  "after receive $soak_n: fds $fdn, match rules ${mn:-n/a}, objects $on"
check "soak: $soak_n of $soak_n receives got the message ($soak_ok)" "((soak_ok == soak_n))"
check "soak: advertise still running after $soak_n receives" "kill -0 $adv"
check "soak: advertise's fd count did not grow ($fd2 -> $fdn)" "((fdn > 0 && fdn <= fd2))"
if [[ -n $m2 && -n $mn ]]; then
  check "soak: advertise's bus match rules did not grow ($m2 -> $mn)" "((mn <= m2))"
else
  echo "# Debug.Stats not available: match rules not counted"
fi
check "soak: advertise's exported objects did not grow ($o2 -> $on)" "((on <= o2))"
stop_pid "$adv"
check "soak: advertise exits 143 on SIGTERM (exit $STATUS)" "((STATUS == 143))"
check "soak: nothing left registered" "wait_for 10 instances_are 0"

# --- 3b. receive interrupted (SIGINT) mid-transfer: it still disconnects ------------------
# As in 4 below, the receiver runs on a pty so its progress line shows when bytes flow; the
# shell under script(1) writes its pid, then becomes blekit (exec), so the signal goes to
# blekit itself, as Ctrl-C would. Its cleanup (Device1.Disconnect) must not be dropped with
# the cancelled task. In this one-host lab one bluetoothd serves both ends, and while the
# advertiser floods notifications it answers D-Bus calls tens of seconds late (-d logging to
# 9p); so the advertiser is paused (SIGSTOP, not stopped: it does not disconnect) as receive
# gets SIGINT. What blekit controls is timed against 5 s: its Device1.Disconnect call must
# reach the bus within 2 s of SIGINT. bluetoothd then drops the link DISCONNECT_TIMER (2 s,
# BlueZ's src/device.c) later at the earliest; here the link was down 5.7 to 9.4 s after
# SIGINT over three runs, so the link-down bound is 15 s, and the time is printed.
seq 1 1000000 | tr '\n' ' ' | head -c 1048576 >"$OUT/1m.msg"
dbus-monitor --system "type='method_call',interface='org.bluez.Device1',member='Disconnect'" \
  >"$OUT/sigint-monitor.txt" 2>&1 &
monitor=$!
script -qfec "echo \$\$ >$OUT/sigint.pid; exec $BLEKIT receive -a hci0 --timeout 60 \
  >$OUT/sigint.out" "$OUT/sigint.err" >/dev/null 2>&1 &
script_pid=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
"$BLEKIT" advertise -a hci1 --file "$OUT/1m.msg" --timeout 120 \
  >"$OUT/adv-sigint.out" 2>"$OUT/adv-sigint.err" &
adv=$!
# Down: the kernel has no LE link to hci1 and bluetoothd does not say Connected.
link_down() {
  ! hcitool -i hci0 con 2>/dev/null | grep -q "LE $HCI1_ADDR" \
    && [[ $(busctl --system get-property org.bluez "$HCI1_DEV" org.bluez.Device1 Connected \
      2>/dev/null) != "b true" ]]
}
if wait_for 90 grep -qE 'received [1-9][0-9]* bytes' "$OUT/sigint.err"; then
  kill -STOP "$adv"
  start=$EPOCHREALTIME
  kill -INT "$(<"$OUT/sigint.pid")"
  if wait_for 15 link_down; then
    down=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    ok "sigint: the link is down ${down} s after SIGINT to receive mid-transfer"
  else
    fail "sigint: the link to hci1 is still up 15 s after SIGINT to receive" \
      "($(hcitool -i hci0 con 2>/dev/null | grep -c LE) LE link(s))"
  fi
  wait_exit "$script_pid" 20
  echo "# receive stderr: $(tail -c 300 "$OUT/sigint.err" | tr '\r\n' '  ')"
  check "sigint: receive exits 130 (script exit $STATUS)" "((STATUS == 130))"
  check "sigint: no partial text on stdout" "[[ ! -s $OUT/sigint.out ]]"
  called=$(grep -m1 "path=$HCI1_DEV; interface=org.bluez.Device1; member=Disconnect" \
    "$OUT/sigint-monitor.txt" | grep -oE 'time=[0-9.]+' | cut -d= -f2)
  after=$(awk -v a="$start" -v b="${called:-0}" 'BEGIN { printf "%.2f", b - a }')
  check "sigint: receive itself called Device1.Disconnect, ${called:+$after s after SIGINT}" \
    "[[ -n '$called' ]] && awk -v t=$after 'BEGIN { exit !(t >= 0 && t <= 2) }'"
else
  fail "sigint: no transfer progress seen: $(tail -c 300 "$OUT/sigint.err" | tr '\r\n' '  ')"
  stop_pid "$script_pid"
fi
kill "$monitor" 2>/dev/null
kill -CONT "$adv"
stop_pid "$adv"
check "sigint: advertise exits 143 on SIGTERM (exit $STATUS)" "((STATUS == 143))"
check "sigint: nothing left registered" "wait_for 10 instances_are 0"

# --- 4. advertise killed mid-transfer of 1 MiB ---------------------------------------------
# The receiver scans first. It runs on a pty (script(1)) with stdout to a file, so that its
# progress line ("received N bytes", drawn on a terminal once a transfer has run for 1 s)
# shows when bytes flow; the advertiser is killed then. 1 MiB takes well over 10 s here.
seq 1 1000000 | tr '\n' ' ' | head -c 1048576 >"$OUT/1m.msg"
script -qfec "$BLEKIT receive -a hci0 --timeout 60 >$OUT/cut.out" "$OUT/cut.err" \
  >/dev/null 2>&1 &
recv=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
"$BLEKIT" advertise -a hci1 --file "$OUT/1m.msg" --timeout 120 \
  >"$OUT/adv-kill.out" 2>"$OUT/adv-kill.err" &
adv=$!
wait_for 90 grep -qE 'received [1-9][0-9]* bytes' "$OUT/cut.err" || echo "# no progress seen"
kill -KILL "$adv"
wait "$adv" 2>/dev/null
wait_exit "$recv" 60
echo "# receive stderr: $(tail -c 300 "$OUT/cut.err" | tr '\r\n' '  ')"
check "cut: receive exits 7 (exit $STATUS)" "((STATUS == 7))"
check "cut: receive says how many bytes arrived (more than 0)" \
  "grep -qE 'cut before the end of the message after [1-9][0-9]* bytes' $OUT/cut.err"
check "cut: no partial text on stdout" "[[ ! -s $OUT/cut.out ]]"
# The killed process's advertisement goes with its bus connection.
check "cut: nothing left registered after the kill" "wait_for 10 instances_are 0"

if lab-bluetoothd status >/dev/null 2>&1; then
  echo "# bluetoothd survived the cut"
else
  echo "# bluetoothd died during the cut (a bluetoothd bug, see dmesg.log); restarting it"
  lab-bluetoothd start >/dev/null 2>&1
fi

# --- 4b. the adapters removed (their controllers gone, not powered off) ---------------------
# btvirt owns both emulated controllers: killed, it takes hci0 and hci1 away from the kernel,
# and bluetoothd removes both adapters, under a scan on hci0, advertise on hci1 and receive on
# hci0 mid-transfer. Each must end by itself within 15 s, with one line that says the adapter
# is gone and exit status 3 (no such adapter), distinct from a power-off's 1. Then btvirt
# runs again (as the lab's init starts it) and bluetoothd powers the new controllers.
"$BLEKIT" scan -a hci0 --json >"$OUT/gone-scan.out" 2>"$OUT/gone-scan.err" &
scan=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
sleep 1
"$BLEKIT" advertise -a hci1 --file "$OUT/1m.msg" >"$OUT/gone-adv.out" 2>"$OUT/gone-adv.err" &
adv=$!
wait_for 20 instances_are 1 || echo "# advertisement not active after 20 s"
check "gone: the scan heard the advertiser" "wait_for 30 grep -q $HCI1_ADDR $OUT/gone-scan.out"
script -qfec "$BLEKIT receive -a hci0 --from $HCI1_ADDR --timeout 60 >$OUT/gone-recv.out" \
  "$OUT/gone-recv.err" >/dev/null 2>&1 &
recv=$!
check "gone: the transfer is under way" \
  "wait_for 90 grep -qsE 'received [1-9][0-9]* bytes' $OUT/gone-recv.err"
radio=$(pidof btvirt)
echo "# killing btvirt (pid $radio), the owner of hci0 and hci1"
kill -KILL $radio
gone_at=$SECONDS
# The three commands' ends and the two adapters' removals (their objects leaving the bus),
# watched together, in whole seconds after the kill. Linux 6.1 removes the controllers at
# once; Linux 6.12 first reports the links lost and removes the controllers about 13 s later
# (docs/lab.md, "Suites by generation"), so each command gets 15 s from its adapter's removal.
adapter_present() {
  busctl --system get-property org.bluez "/org/bluez/$1" org.bluez.Adapter1 Address >/dev/null 2>&1
}
declare -A gone_status=() gone_took=() removed_at=()
declare -A gone_pid=([advertise]=$adv [scan]=$scan [receive]=$recv)
pending=5
while ((pending > 0 && SECONDS - gone_at < 60)); do
  for name in advertise scan receive; do
    if [[ -z ${gone_took[$name]:-} ]] && ! kill -0 "${gone_pid[$name]}" 2>/dev/null; then
      gone_took[$name]=$((SECONDS - gone_at))
      ((pending--))
    fi
  done
  for adapter in hci0 hci1; do
    if [[ -z ${removed_at[$adapter]:-} ]] && ! adapter_present "$adapter"; then
      removed_at[$adapter]=$((SECONDS - gone_at))
      ((pending--))
    fi
  done
  sleep 0.2
done
for name in advertise scan receive; do
  [[ -n ${gone_took[$name]:-} ]] || gone_took[$name]=$((SECONDS - gone_at))
  wait_exit "${gone_pid[$name]}" 1
  gone_status[$name]=$STATUS
done
check "gone: bluetoothd removed hci0 and hci1 within 30 s of btvirt's end (after ~${removed_at[hci0]:-never} and ~${removed_at[hci1]:-never} s)" \
  "((\${removed_at[hci0]:-99} <= 30 && \${removed_at[hci1]:-99} <= 30))"
for name in advertise scan receive; do
  case $name in
    advertise) err=$OUT/gone-adv.err adapter=hci1 ;;
    scan) err=$OUT/gone-scan.err adapter=hci0 ;;
    receive) err=$OUT/gone-recv.err adapter=hci0 ;;
  esac
  echo "# $name stderr: $(tail -c 300 "$err" | tr '\r\n' '  ')"
  took=${gone_took[$name]} removed=${removed_at[$adapter]:-99}
  # receive draws progress on its terminal first (and script(1) adds a line of its own).
  if [[ $name == receive ]] && ((gone_status[receive] == 7 && took + 3 <= removed)); then
    # The link's loss came first, seconds before the removal (Linux 6.12): the transfer was cut
    # by a disconnection, and exit 7 says what happened first.
    check "gone: receive, its link lost ~$took s after the kill and before hci0's removal (~$removed s), exits 7 saying the transfer was cut by the disconnection, no partial text" \
      "grep -q 'blekit: transfer cut .*disconnected)' $err && [[ ! -s $OUT/gone-recv.out ]]"
    continue
  fi
  check "gone: $name exits 3 within 15 s of $adapter's removal (exit ${gone_status[$name]} after ~$took s, removed after ~$removed s)" \
    "((gone_status[$name] == 3 && $took <= $removed + 15))"
  if [[ $name == receive ]]; then
    check "gone: receive says the transfer was cut as $adapter was removed, and no partial text" \
      "grep -q 'blekit: transfer cut .*(adapter $adapter was removed)' $err && [[ ! -s $OUT/gone-recv.out ]]"
  else
    check "gone: $name says in one line that $adapter was removed" \
      "[[ \$(wc -l <$err) == 1 ]] && grep -q '$adapter was removed' $err"
  fi
done
chrt -f 10 btvirt -L -l2 </dev/null >>"$OUT/gone-btvirt.log" 2>&1 &
lab-bluetoothd wait 40 >"$OUT/gone-ready.log" 2>&1 || echo "# the new controllers were not powered within 40 s"
check "gone: after btvirt returns, blekit sees both adapters powered" \
  "$BLEKIT adapters >$OUT/gone-adapters.out 2>&1 && grep -q hci1 $OUT/gone-adapters.out && wait_for 20 powered hci1 && powered hci0"

# --- 5. the system bus restarts under advertise, scan, monitor and receive -----------------
# Last: bluetoothd goes with the bus (it exits when its connection is lost) and both are
# started again at the end, but nothing here depends on that. None of the four has a
# --timeout that could end it: each must end by itself, with exit status 4, saying so.
[[ -s $OUT/1m.msg ]] || seq 1 1000000 | tr '\n' ' ' | head -c 1048576 >"$OUT/1m.msg"
# The scans first: the emulator reports an advertiser as it switches on (docs/lab.md).
"$BLEKIT" scan -a hci0 --json >"$OUT/bus-scan.out" 2>"$OUT/bus-scan.err" &
scan=$!
"$BLEKIT" monitor -a hci0 >"$OUT/bus-monitor.out" 2>"$OUT/bus-monitor.err" &
mon=$!
wait_for 20 discovering || echo "# hci0 not discovering after 20 s"
sleep 1
"$BLEKIT" advertise -a hci1 --file "$OUT/1m.msg" >"$OUT/bus-adv.out" 2>"$OUT/bus-adv.err" &
adv=$!
wait_for 20 instances_are 1 || echo "# advertisement not active after 20 s"
check "bus: the scan heard the advertiser" "wait_for 30 grep -q $HCI1_ADDR $OUT/bus-scan.out"
# The receiver on a pty, as in section 4, so that its progress shows when bytes flow.
script -qfec "$BLEKIT receive -a hci0 --from $HCI1_ADDR --timeout 60 >$OUT/bus-recv.out" \
  "$OUT/bus-recv.err" >/dev/null 2>&1 &
recv=$!
check "bus: the transfer is under way" \
  "wait_for 90 grep -qsE 'received [1-9][0-9]* bytes' $OUT/bus-recv.err"
bus_pid=$(pidof dbus-daemon)
echo "# stopping the system bus (dbus-daemon pid $bus_pid) with SIGTERM"
kill -TERM $bus_pid
lost_at=$SECONDS
# All four are waited for first (builtins only, while they run), then checked: the checks
# start processes, which costs seconds under emulation and must not count as their time.
declare -A bus_status bus_took
for name in advertise scan monitor receive; do
  case $name in
    advertise) pid=$adv ;; scan) pid=$scan ;; monitor) pid=$mon ;; receive) pid=$recv ;;
  esac
  left=$((lost_at + 10 - SECONDS))
  ((left > 0)) || left=1
  wait_exit "$pid" "$left"
  bus_status[$name]=$STATUS
  bus_took[$name]=$((SECONDS - lost_at))
done
# bus_loss_ended NAME ERRFILE: NAME ended by itself within 10 s of the bus going away, with
# exit status 4 and exactly one line on stderr that says so.
bus_loss_ended() {
  local name=$1 err=$2
  check "bus: $name exits 4 within 10 s of the bus going away (exit ${bus_status[$name]} after ~${bus_took[$name]} s)" \
    "((bus_status[$name] == 4))"
  check "bus: $name says so in one line on stderr" \
    "[[ \$(wc -l <$err) == 1 ]] && grep -q 'lost the connection to the system bus' $err"
  echo "# $name stderr: $(head -c 300 "$err" | tr '\n' ' ')"
}
bus_loss_ended advertise "$OUT/bus-adv.err"
bus_loss_ended scan "$OUT/bus-scan.err"
bus_loss_ended monitor "$OUT/bus-monitor.err"
check "bus: monitor printed its summary first" "grep -q '^monitored ' $OUT/bus-monitor.out"
# receive draws progress on its terminal: the last line is the one that counts.
check "bus: receive mid-transfer exits 4 within 10 s (exit ${bus_status[receive]} after ~${bus_took[receive]} s)" \
  "((bus_status[receive] == 4))"
check "bus: receive says the bus was lost, and prints no partial text" \
  "grep -q 'lost the connection to the system bus' $OUT/bus-recv.err && [[ ! -s $OUT/bus-recv.out ]]"
echo "# receive stderr: $(tail -c 300 "$OUT/bus-recv.err" | tr '\r\n' '  ')"
# The system bus again, as the lab's init starts it, then bluetoothd (gone with the old bus).
for _ in $(seq 1 50); do kill -0 $bus_pid 2>/dev/null || break; sleep 0.1; done
dbus-daemon --system --nofork --nopidfile --nosyslog </dev/null >>"$OUT/bus-dbus.log" 2>&1 &
bus_up() {
  dbus-send --system --print-reply --reply-timeout=2000 --dest=org.freedesktop.DBus \
    /org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null 2>&1
}
wait_for 20 bus_up || echo "# the new dbus-daemon did not answer within 20 s (see bus-dbus.log)"
lab-bluetoothd stop >/dev/null 2>&1
lab-bluetoothd start >"$OUT/bus-bluetoothd.log" 2>&1
check "bus: after the restart, blekit sees the adapters again" \
  "$BLEKIT adapters >$OUT/bus-adapters.out 2>&1 && grep -q hci1 $OUT/bus-adapters.out"

finish_suite
