#!/usr/bin/env bash
# Runs inside the lab (scripts/bench-ceiling), in one host (LAB_HOST=single: hci0 sends to hci1)
# or in two (LAB_HOST=a sends from its hci0, LAB_HOST=b listens on its hci0; the two coordinate
# through files in $LAB_SHARED). The listener's controller advertises, connectable, through the
# kernel's management interface (btmgmt); then, for K = 1 and K = PARALLEL and for each chunk
# size, l2cap_ceiling sends BYTES from the central to a listener over K fresh LE credit-based
# channels at once on one LE link. After each case the central drops the link (btmgmt
# disconnect, and waits until the kernel's sysfs lists no connection), so every case starts on a
# new link and nothing is left connected for the GATT trials. Output, on the central's side, one
# line per side and case:
#   ceiling k=K chunk=C send|listen JSON        or   ceiling k=K chunk=C send|listen failed: CAUSE
# With ATT=1, the same cases follow with the first channel on LE's fixed ATT channel (l2cap_ceiling
# --att; "ceiling att k=K ..."): K = 1 is the ATT bearer alone, K = PARALLEL the bearer and
# PARALLEL - 1 credit-based channels, the shape of a stock bluetoothd's notification path. The
# kernel lets only one socket listen on CID 4, so bluetoothd is stopped for those cases (on both
# hosts) and started again before the GATT trials; the controllers are powered on with btmgmt
# meanwhile, as bluetoothd powers them off when it stops.
# With BLEKIT set (a blekit binary the guest sees), GATT_TRIALS (default 3) transfers of the
# same size follow in the same boot, in the raw cases' direction: in one host `blekit advertise
# --file MSG --once` on hci1 to `blekit receive --json` on hci0; in two, advertise on host a
# (the sender's) to receive on host b (the listener's); the central's scan started first (the
# emulator reports an advertiser reliably only to a scan already running), one line each:
#   gatt trial=I receive JSON (the message left out)   or   gatt trial=I failed: CAUSE
# followed by what bluetoothd logged about EATT during that trial (each host's bluetoothd in
# two-host mode; the one bluetoothd of both controllers in one host), unless the lab runs
# without its trace (LAB_TRACE=0: bluetoothd without -d logs none of it).
#   in-lab.sh BINARY BYTES MTU PARALLEL CHUNK...
# Environment: BLEKIT, ATT (0), GATT_TRIALS (3), SETTLE (seconds between the last channel's
# connect and the first write, default 3: bluetoothd's GATT discovery and EATT setup on the new
# link).
set -u
binary=$1 bytes=$2 mtu=$3 parallel=$4
shift 4
chunks=("$@")
settle=${SETTLE:-3}
trials=${GATT_TRIALS:-3}
att=${ATT:-0}
host=${LAB_HOST:-single}
shared=${LAB_SHARED:-/tmp}
log=${LAB_BLUETOOTHD_LOG:-/dev/null}
ks=(1)
((parallel > 1)) && ks+=("$parallel")

# address_of ADAPTER: the adapter's address from LAB_ADDRESSES (hci0=AA:... hci1=...).
address_of() {
  local pair
  for pair in ${LAB_ADDRESSES:-}; do
    [[ ${pair%%=*} == "$1" ]] && { printf '%s\n' "${pair#*=}"; return 0; }
  done
  return 1
}

# wait_file PATH SECONDS: waits until PATH exists, at most SECONDS.
wait_file() {
  local n=$(($2 * 5))
  until [[ -e $1 ]]; do
    ((n-- > 0)) || return 1
    sleep 0.2
  done
}

# put_file PATH: stdin into PATH, which appears at once (the other host polls for it).
put_file() { cat >"$1.part" && mv "$1.part" "$1"; }

# mgmt ARGS...: btmgmt ARGS with its input held open for a second. With its input at its end
# (the lab runs the command with /dev/null), btmgmt 5.66 apparently quits before the kernel's
# reply: commands took effect, but `btmgmt con` printed no connection in the run of 2026-12-05
# 06:22 while bluetoothd.log showed one, so an earlier drop_link, which relied on it, dropped
# nothing. Link state now comes from sysfs (links_of).
mgmt() { sleep 1 | timeout 10 btmgmt "$@" >/dev/null 2>&1; }

# links_of INDEX: the handles of controller INDEX's connections, from the kernel's sysfs entries
# (hciN:HANDLE), which exist from a link's connection to its end.
links_of() {
  local entry
  for entry in /sys/class/bluetooth/hci"$1":*; do
    [[ -e $entry ]] && printf '%s ' "${entry##*:}"
  done
}

# drop_link INDEX PEER: disconnects controller INDEX's LE link to PEER (btmgmt disconnect; after
# 5 s also hcitool ledc on each handle) and waits, at most 10 s, until the kernel lists no link.
drop_link() {
  local index=$1 peer=$2 n handle
  for ((n = 0; n < 50; n++)); do
    [[ -z $(links_of "$index") ]] && return 0
    if ((n == 0)); then
      mgmt --index "$index" disconnect -t 1 "$peer" &
    elif ((n == 25)); then
      for handle in $(links_of "$index"); do
        timeout 5 hcitool -i "hci$index" ledc "$handle" >/dev/null 2>&1
      done
    fi
    sleep 0.2
  done
  echo "note: hci$index still has link(s) $(links_of "$index")to $peer after 10 s"
}

# powered INDEX: waits, at most 10 s, until controller INDEX is up (hciconfig: UP RUNNING).
powered() {
  local n=50
  until hciconfig "hci$1" 2>/dev/null | grep -q "UP RUNNING"; do
    ((n-- > 0)) || { echo "note: hci$1 not up 10 s after power on"; return 1; }
    sleep 0.2
  done
}

# outcome STATUS OUT ERR: the JSON line on success, else "failed: " and the cause.
outcome() {
  local status=$1 out=$2 err=$3
  if ((status == 0)) && [[ -s $out ]]; then
    cat "$out"
  elif ((status == 124)); then
    echo "failed: killed after its time limit; $(tail -n 1 "$err" 2>/dev/null)"
  elif ((status > 128)); then
    # A kernel oops in a system call kills the process with a signal; say so, with the oops.
    echo "failed (signal $((status - 128))): $(tail -n 1 "$err" 2>/dev/null | tr -d '\n')" \
      "last kernel BUG or oops in dmesg: $(dmesg | grep -E 'kernel BUG|BUG:|general protection' |
        tail -n 1)"
  else
    echo "failed (exit $status):" \
      "$(grep -v 'listening on' "$err" 2>/dev/null | tail -n 2 | tr '\n' ' ')"
  fi
}

# start_listener CASE PSM K ADDRESS [--att]: starts l2cap_ceiling listen in the background (pid
# in $listener) and returns once it listens (at most 10 s).
start_listener() {
  local case=$1 psm=$2 k=$3 address=$4 n=50
  shift 4
  timeout 240 "$binary" listen "$address" "$psm" "$bytes" "$mtu" --channels "$k" --idle 30 "$@" \
    >"/tmp/listen-$case" 2>"/tmp/listen-$case.err" &
  listener=$!
  until grep -q "listening on" "/tmp/listen-$case.err" 2>/dev/null; do
    ((n-- > 0)) || break
    sleep 0.2
  done
}

# send CASE PSM K CHUNK LOCAL REMOTE [--att]: runs l2cap_ceiling send; its outcome line in $sent.
send() {
  local case=$1 psm=$2 k=$3 chunk=$4 local=$5 remote=$6 status
  shift 6
  timeout 240 "$binary" send "$local" "$remote" "$psm" "$bytes" "$chunk" "$mtu" --channels "$k" \
    --settle "$settle" --idle 30 "$@" >"/tmp/send-$case" 2>"/tmp/send-$case.err"
  status=$?
  sent=$(outcome "$status" "/tmp/send-$case" "/tmp/send-$case.err")
}

# eatt_since LINE: what bluetoothd logged about EATT after line LINE of its log.
eatt_since() {
  local attempts connected
  if [[ ${LAB_TRACE:-1} == 0 ]]; then
    echo "eatt: not logged (the lab runs bluetoothd without -d)"
    return
  fi
  attempts=$(tail -n +"$(($1 + 1))" "$log" |
    grep -c "btd_gatt_client_eatt_connect() Connection attempt")
  connected=$(tail -n +"$(($1 + 1))" "$log" | grep -c "EATT channel connected")
  echo "eatt connection attempts=$attempts, 'EATT channel connected'=$connected"
}

log_lines() { wc -l <"$log" 2>/dev/null || echo 0; }

message() {
  head -c "$bytes" /dev/urandom | base64 -w 0 | head -c "$bytes" >/tmp/message
}

# gatt_line TRIAL STATUS: the receive's outcome line, its message left out.
gatt_line() {
  local trial=$1 status=$2
  if ((status == 0)) && [[ -s /tmp/gatt-$trial ]]; then
    echo "gatt trial=$trial receive $(sed 's/"message":"[^"]*",//' "/tmp/gatt-$trial")"
  else
    echo "gatt trial=$trial failed (exit $status):" \
      "$(tail -n 3 "/tmp/gatt-$trial.err" | tr '\n' ' ' | tail -c 400)"
  fi
}

# stop_advertiser PID: waits at most 20 s for the advertiser to end by itself, then ends it.
stop_advertiser() {
  local pid=$1 n=100
  while kill -0 "$pid" 2>/dev/null; do
    if ((n-- <= 0)); then
      echo "note: advertise still running 20 s after the receive ended; stopped"
      kill "$pid" 2>/dev/null
      break
    fi
    sleep 0.2
  done
  wait "$pid" 2>/dev/null
}

# start_receive TRIAL: starts blekit receive on hci0 (pid in $receiver) and waits, at most
# 15 s, until hci0 is discovering.
start_receive() {
  local trial=$1 n=75
  timeout 120 "$BLEKIT" receive -a hci0 --timeout 60 --json >"/tmp/gatt-$trial" \
    2>"/tmp/gatt-$trial.err" &
  receiver=$!
  until busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Discovering \
    2>/dev/null | grep -q true; do
    ((n-- > 0)) || { echo "note: hci0 was not discovering after 15 s (trial $trial)"; break; }
    sleep 0.2
  done
}

# without_bluetoothd INDEX...: stops bluetoothd and powers the controllers on again (LE only).
without_bluetoothd() {
  local index
  lab-bluetoothd stop || echo "note: lab-bluetoothd stop failed"
  for index in "$@"; do
    mgmt --index "$index" power on
    powered "$index"
  done
}

# with_bluetoothd: starts bluetoothd again; returns once every controller is powered.
with_bluetoothd() {
  lab-bluetoothd start >/dev/null 2>&1 ||
    echo "note: bluetoothd was not ready within 30 s of its start"
}

echo "in-lab: host $host, addresses ${LAB_ADDRESSES:-?}, channels config ${LAB_CHANNELS:-stock}," \
  "bytes $bytes, mtu ${mtu/#0/kernel default}, K ${ks[*]}, chunks ${chunks[*]}, settle $settle s," \
  "ATT-channel cases $( ((att)) && echo yes || echo no)"

# each_case FUNC [--att]: runs FUNC CASE K CHUNK LABEL [--att] for every K and chunk size, each
# case on a PSM of its own (psm, advanced here); with --att the cases are named att-K-CHUNK and
# their lines say "ceiling att k=...".
each_case() {
  local fn=$1 k chunk prefix="" label=""
  shift
  if [[ ${1-} == --att ]]; then prefix=att- label="att "; fi
  for k in "${ks[@]}"; do
    for chunk in "${chunks[@]}"; do
      "$fn" "$prefix$k-$chunk" "$k" "$chunk" "$label" "$@"
      psm=$((psm + 2))
    done
  done
}

case $host in
  single)
    central=$(address_of hci0 || echo 00:AA:01:00:00:00)
    peripheral=$(address_of hci1 || echo 00:AA:01:01:00:01)
    mgmt --index 1 connectable on
    mgmt --index 1 advertising on
    # One case, both ends in this host: CASE K CHUNK LABEL [--att].
    local_case() {
      local case=$1 k=$2 chunk=$3 label=$4 heard
      shift 4
      start_listener "$case" "$psm" "$k" "$peripheral" "$@"
      send "$case" "$psm" "$k" "$chunk" "$central" "$peripheral" "$@"
      wait "$listener"
      heard=$(outcome $? "/tmp/listen-$case" "/tmp/listen-$case.err")
      echo "ceiling ${label}k=$k chunk=$chunk send $sent"
      echo "ceiling ${label}k=$k chunk=$chunk listen $heard"
      drop_link 0 "$peripheral"
    }
    psm=129
    each_case local_case
    if ((att)); then
      without_bluetoothd 0 1
      mgmt --index 1 connectable on
      mgmt --index 1 advertising on
      each_case local_case --att
      mgmt --index 1 advertising off
      with_bluetoothd
    fi
    [[ -n ${BLEKIT:-} ]] || exit 0
    mgmt --index 1 advertising off
    message
    for ((trial = 1; trial <= trials; trial++)); do
      before=$(log_lines)
      start_receive "$trial"
      timeout 180 "$BLEKIT" advertise -a hci1 --file /tmp/message --once --timeout 170 \
        >/dev/null 2>"/tmp/adv-$trial.err" &
      advertiser=$!
      wait "$receiver"
      gatt_line "$trial" $?
      stop_advertiser "$advertiser"
      echo "gatt trial=$trial $(eatt_since "$before")"
      drop_link 0 "$peripheral"
      sleep 1
    done
    ;;

  a)
    central=$(address_of hci0 || echo 00:AA:01:00:00:00)
    wait_file "$shared/b-addresses" 120 || { echo "a: host b never said its address"; exit 0; }
    peripheral=$(sed -n 's/.*hci0=\([0-9A-F:]*\).*/\1/p' "$shared/b-addresses")
    echo "a: central $central (hci0), peripheral $peripheral (host b's hci0)"
    # One case against host b's listener: CASE K CHUNK LABEL [--att].
    remote_case() {
      local case=$1 k=$2 chunk=$3 label=$4
      shift 4
      if ! wait_file "$shared/ceiling-$case.listening" 120; then
        echo "ceiling ${label}k=$k chunk=$chunk send failed: host b did not listen within 120 s"
        return
      fi
      send "$case" "$psm" "$k" "$chunk" "$central" "$peripheral" "$@"
      echo "ceiling ${label}k=$k chunk=$chunk send $sent"
      if wait_file "$shared/ceiling-$case.listen" 150; then
        echo "ceiling ${label}k=$k chunk=$chunk listen $(cat "$shared/ceiling-$case.listen")"
      else
        echo "ceiling ${label}k=$k chunk=$chunk listen failed: host b reported nothing within 150 s"
      fi
      drop_link 0 "$peripheral"
    }
    psm=129
    each_case remote_case
    if ((att)); then
      without_bluetoothd 0
      each_case remote_case --att
      with_bluetoothd
    fi
    : >"$shared/ceiling-done"
    [[ -n ${BLEKIT:-} ]] || exit 0
    # The GATT trials send the way the raw cases do, from host a to host b: the bridge between
    # the hosts is not symmetric (host b's controller is attached through a virtio serial port
    # and the kernel's HCI UART line discipline, and b to a carried a fifth of a to b in the
    # runs of 2026-12-05), so a ceiling and a transfer are compared in one direction only.
    # Host b runs the central (`blekit receive`) and host a the peripheral (`advertise`).
    wait_file "$shared/b-gatt-ready" 120 || echo "note: host b not ready for GATT after 120 s"
    message
    for ((trial = 1; trial <= trials; trial++)); do
      if ! wait_file "$shared/gatt-$trial.scanning" 200; then
        echo "gatt trial=$trial failed: host b did not start scanning within 200 s"
        break
      fi
      before=$(log_lines)
      timeout 180 "$BLEKIT" advertise -a hci0 --file /tmp/message --once --timeout 170 \
        >/dev/null 2>"/tmp/adv-$trial.err" &
      advertiser=$!
      if wait_file "$shared/gatt-$trial.result" 200; then
        cat "$shared/gatt-$trial.result"
      else
        echo "gatt trial=$trial failed: host b reported nothing within 200 s"
      fi
      stop_advertiser "$advertiser"
      echo "gatt trial=$trial advertise: $(tail -n 1 "/tmp/adv-$trial.err" | cut -c1-200);" \
        "$(eatt_since "$before") (host a's bluetoothd, the peripheral's)"
      wait_file "$shared/gatt-$trial.b" 30 &&
        echo "gatt trial=$trial b: $(cat "$shared/gatt-$trial.b")"
      drop_link 0 "$peripheral"
      sleep 1
    done
    ;;

  b)
    peripheral=$(address_of hci0 || echo 00:AA:01:01:00:42)
    mgmt --index 0 connectable on
    mgmt --index 0 advertising on
    echo "${LAB_ADDRESSES:-hci0=$peripheral}" | put_file "$shared/b-addresses"
    # One case for host a's sender: CASE K CHUNK LABEL [--att].
    listen_case() {
      local case=$1 k=$2 chunk=$3 label=$4
      shift 4
      start_listener "$case" "$psm" "$k" "$peripheral" "$@"
      : >"$shared/ceiling-$case.listening"
      wait "$listener"
      outcome $? "/tmp/listen-$case" "/tmp/listen-$case.err" |
        put_file "$shared/ceiling-$case.listen"
      echo "b: case ${label}k=$k chunk=$chunk listened:" \
        "$(cut -c1-120 "$shared/ceiling-$case.listen")"
    }
    psm=129
    each_case listen_case
    if ((att)); then
      without_bluetoothd 0
      mgmt --index 0 connectable on
      mgmt --index 0 advertising on
      each_case listen_case --att
      mgmt --index 0 advertising off
      with_bluetoothd
    fi
    wait_file "$shared/ceiling-done" 300 || echo "note: host a did not finish the ceiling in 300 s"
    [[ -n ${BLEKIT:-} ]] || exit 0
    mgmt --index 0 advertising off
    : >"$shared/b-gatt-ready"
    for ((trial = 1; trial <= trials; trial++)); do
      before=$(log_lines)
      start_receive "$trial"
      : >"$shared/gatt-$trial.scanning"
      wait "$receiver"
      gatt_line "$trial" $? | put_file "$shared/gatt-$trial.result"
      echo "$(eatt_since "$before") (host b's bluetoothd, the central's)" |
        put_file "$shared/gatt-$trial.b"
      # Host a drops the link; the next trial starts once it is gone here too.
      n=50
      while [[ -n $(links_of 0) ]] && ((n-- > 0)); do sleep 0.2; done
    done
    ;;
esac
exit 0
