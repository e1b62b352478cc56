#!/usr/bin/env bash
# The soak's guest side (scripts/soak runs it inside the lab VM): see scripts/soak.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:?}
OUT=${LAB_RESULTS:-/tmp}/soak
mkdir -p "$OUT"
SECONDS_TOTAL=${SOAK_SECONDS:-3600}
RESTART=${SOAK_RESTART_SECONDS:-600}
PEER=00:AA:01:01:00:01

# A 4 KiB text message with a marker at each end, so a cut or reordered transfer shows.
{
  printf 'soak-begin '
  seq 1 2000 | tr '\n' ' ' | head -c 4070
  printf ' soak-end'
} >"$OUT/message"

discovering() {
  busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Discovering \
    2>/dev/null | grep -q true
}
registered() {
  [[ $(busctl --system call org.bluez /org/bluez/hci1 org.freedesktop.DBus.Properties Get ss \
    org.bluez.LEAdvertisingManager1 ActiveInstances 2>/dev/null | awk '{print $NF}') == 1 ]]
}
bus_name_of() {
  local name pid
  for name in $(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus ListNames | grep -oE '":1\.[0-9]+"' | tr -d '"'); do
    pid=$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
      GetConnectionUnixProcessID s "$name" 2>/dev/null | awk '{print $NF}')
    [[ $pid == "$1" ]] && { echo "$name"; return; }
  done
}
# figures PID: "fds N threads N rss_kib N match_rules N" for the process.
figures() {
  local pid=$1 name rules
  name=$(bus_name_of "$pid")
  rules=$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.Debug.Stats GetConnectionStats s "$name" 2>/dev/null |
    grep -oE '"MatchRules" u [0-9]+' | awk '{print $NF}')
  echo "fds $(ls "/proc/$pid/fd" | wc -l)" \
    "threads $(awk '/^Threads:/ {print $2}' "/proc/$pid/status")" \
    "rss_kib $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")" \
    "match_rules ${rules:-n/a}"
}

# The advertiser switches on under a running scan (the emulated air reports an advertiser only
# when its advertising switches on, docs/lab.md); afterwards every receive names the peer.
"$BLEKIT" scan -a hci0 --timeout 30 >"$OUT/first-scan.out" 2>&1 &
first_scan=$!
wait_discovering hci0 30
"$BLEKIT" advertise -a hci1 --file "$OUT/message" >"$OUT/advertise.out" 2>"$OUT/advertise.err" &
adv=$!
wait_for 30 registered || echo "# the advertisement was not active after 30 s"
wait_for 30 grep -q "$PEER" "$OUT/first-scan.out" || echo "# the first scan did not hear $PEER"
kill "$first_scan" 2>/dev/null
wait "$first_scan" 2>/dev/null

exact=0 failed=0 scans_ok=0 scans_failed=0 monitors_ok=0 monitors_failed=0 restarts=0
declare -A statuses=()
round=0 start=$SECONDS next_restart=$RESTART at_start=
while ((SECONDS - start < SECONDS_TOTAL)); do
  round=$((round + 1))
  "$BLEKIT" receive -a hci0 --from "$PEER" --timeout 60 >"$OUT/receive.out" \
    2>"$OUT/receive.err"
  rc=$?
  if ((rc == 0)) && cmp -s "$OUT/message" "$OUT/receive.out"; then
    exact=$((exact + 1))
  else
    failed=$((failed + 1))
    statuses[$rc]=$((${statuses[$rc]:-0} + 1))
    cp "$OUT/receive.err" "$OUT/receive-failed-$round.err"
    echo "# round $round: receive exit $rc: $(tail -n 1 "$OUT/receive.err")"
  fi
  [[ -n $at_start ]] || at_start=$(figures "$adv")
  if "$BLEKIT" scan -a hci0 --json --timeout 4 >"$OUT/scan.out" 2>"$OUT/scan.err"; then
    scans_ok=$((scans_ok + 1))
  else
    scans_failed=$((scans_failed + 1))
    echo "# round $round: scan exit $?: $(tail -n 1 "$OUT/scan.err")"
  fi
  if "$BLEKIT" monitor -a hci0 --json --timeout 4 >"$OUT/monitor.out" 2>"$OUT/monitor.err"; then
    monitors_ok=$((monitors_ok + 1))
  else
    monitors_failed=$((monitors_failed + 1))
    echo "# round $round: monitor exit $?: $(tail -n 1 "$OUT/monitor.err")"
  fi
  if ! kill -0 "$adv" 2>/dev/null; then
    echo "# advertise ended in round $round: $(tail -n 2 "$OUT/advertise.err" | tr '\n' ' ')"
    break
  fi
  if ((SECONDS - start >= next_restart)); then
    lab-bluetoothd restart >>"$OUT/restarts.log" 2>&1
    restarts=$((restarts + 1))
    next_restart=$((next_restart + RESTART))
    wait_for 60 registered || echo "# not registered again 60 s after restart $restarts"
    echo "# bluetoothd restart $restarts at $((SECONDS - start)) s; advertise: $(figures "$adv")"
  fi
done
alive=no
kill -0 "$adv" 2>/dev/null && alive=yes
at_end=$(figures "$adv" 2>/dev/null)
kill -TERM "$adv" 2>/dev/null
wait "$adv"
adv_status=$?
failures=
for rc in "${!statuses[@]}"; do failures+=" exit $rc: ${statuses[$rc]}"; done
{
  echo "soak: $((SECONDS - start)) s, $round rounds, $restarts bluetoothd restarts"
  echo "receive: $exact byte-exact, $failed failed${failures:+ (}${failures# }${failures:+)}"
  echo "scan: $scans_ok ok, $scans_failed failed; monitor: $monitors_ok ok, $monitors_failed failed"
  echo "advertise at start: $at_start"
  echo "advertise at end:   ${at_end:-gone}"
  echo "advertise alive at the end: $alive; exit on SIGTERM: $adv_status"
} | tee "$OUT/soak.txt"
