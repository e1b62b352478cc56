#!/usr/bin/env bash
# The lab's self-test checks that run inside the lab, called by
# Tests/Lab/run-lab-selftests.sh:
#
#   scripts/lab run --channels 1 -- Tests/Lab/lab-selftest-guest.sh single
#   scripts/lab two-host --a 'Tests/Lab/lab-selftest-guest.sh a' \
#                        --b 'Tests/Lab/lab-selftest-guest.sh b'
#
# Each check prints "ok - NAME" or "not ok - NAME: DETAIL", also appended to
# $LAB_RESULTS/selftest.txt, which the runner counts. "single" then exits
# with status 42 on purpose (the runner checks that the status comes back);
# "a" and "b" exit 0 when every check passed, else 1.

set -uo pipefail
# wait_for, prop, time_stamp
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RESULTS_FILE=$LAB_RESULTS/selftest.txt
WORK=$LAB_RESULTS/selftest
# fifos cannot live on the 9p results share: keep them on a tmpfs.
FIFOS=$(mktemp -d /run/lab-selftest.XXXXXX)
mkdir -p "$WORK"
FAILED=0

# This suite's own ok, not_ok and check, in place of common.sh's: TAP-like lines ("ok - NAME",
# "not ok - NAME: WHY") also kept in $RESULTS_FILE, which the host's run-lab-selftests.sh
# counts; FAILED is a flag (the script's status), and check keeps COMMAND's output for the
# not-ok line.
ok() { time_stamp ok "$1"; printf 'ok - %s\n' "$1" | tee -a "$RESULTS_FILE"; }
not_ok() {
  time_stamp FAIL "$1: $2"
  printf 'not ok - %s: %s\n' "$1" "$2" | tee -a "$RESULTS_FILE"
  FAILED=1
}
# check NAME COMMAND...: ok if COMMAND succeeds.
check() {
  local name=$1
  shift
  if "$@" >"$WORK/last-check.out" 2>&1; then
    ok "$name"
  else
    not_ok "$name" "$(tr '\n' ' ' <"$WORK/last-check.out" | cut -c1-300)"
  fi
}


# --------------------------------------------------------------------------
# D-Bus helpers (dbus-send only; python is not assumed)


# device_path ADAPTER ADDRESS: the object path of a device under ADAPTER.
device_path() {
  printf '/org/bluez/%s/dev_%s\n' "$1" "${2//:/_}"
}

# address_of ADAPTER: from LAB_ADDRESSES ("hci0=AA:.. hci1=BB:.."). Kept in place of
# common.sh's, which prints nothing for an unset LAB_ADDRESSES: this one fails on it (set -u),
# as a self-test of the lab's environment should.
address_of() {
  local pair
  for pair in $LAB_ADDRESSES; do
    [[ ${pair%%=*} == "$1" ]] && { printf '%s\n' "${pair#*=}"; return 0; }
  done
  return 1
}

# --------------------------------------------------------------------------
# bluetoothctl driven through a fifo, so that it stays alive (advertisements
# and discovery sessions belong to the client that asked for them).

# btctl_start NAME: start bluetoothctl with commands read from a fifo;
# output goes to $WORK/NAME.log.
btctl_start() {
  local name=$1
  mkfifo "$FIFOS/$name" || return 1
  bluetoothctl <"$FIFOS/$name" >"$WORK/$name.log" 2>&1 &
  eval "BTCTL_PID_$name=\$!"
  eval "exec {BTCTL_FD_$name}>\"\$FIFOS/\$name\""
  rm -f "$FIFOS/$name"
}

# btctl NAME COMMAND...: send one line to that bluetoothctl.
btctl() {
  local name=$1 fdvar="BTCTL_FD_$1"
  shift
  printf '%s\n' "$*" >&"${!fdvar}"
}

# btctl_stop NAME: quit that bluetoothctl (killing it after 5 s).
btctl_stop() {
  local name=$1 pidvar="BTCTL_PID_$1" fdvar="BTCTL_FD_$1"
  btctl "$name" quit 2>/dev/null
  eval "exec {$fdvar}>&-"
  wait_for 5 bash -c "! kill -0 ${!pidvar} 2>/dev/null" || kill "${!pidvar}" 2>/dev/null
  wait "${!pidvar}" 2>/dev/null
}

# advertising ADAPTER: true if ADAPTER has an active advertisement.
advertising() {
  local n
  n=$(prop "/org/bluez/$1" org.bluez.LEAdvertisingManager1 ActiveInstances)
  echo "ActiveInstances on $1: $n"
  [[ $n =~ ^byte\ [1-9] ]]
}

# start_advertising NAME ADAPTER_ADDRESS LOCAL_NAME ADAPTER: register an
# advertisement with bluetoothctl; (re)sends the commands until the adapter
# reports an active instance (bluetoothctl may not know the adapter yet).
start_advertising() {
  local name=$1 address=$2 local_name=$3 adapter=$4 try
  btctl_start "$name"
  for try in 1 2 3 4 5; do
    btctl "$name" "select $address"
    btctl "$name" "advertise.name $local_name"
    btctl "$name" "advertise.discoverable on"
    btctl "$name" "advertise on"
    wait_for 4 advertising "$adapter" >"$WORK/$name.state" && return 0
  done
  return 1
}

not_advertising() { ! advertising "$1"; }

# readvertise NAME ADAPTER: unregister and register the advertisement again.
# btvirt sends advertising reports only when advertising or scanning is
# switched on, and the kernel drops reports that arrive before it has marked
# discovery as started: a fresh registration under a running scan is what
# reliably gets reported.
readvertise() {
  local name=$1 adapter=$2
  btctl "$name" "advertise off"
  wait_for 4 not_advertising "$adapter" >/dev/null
  btctl "$name" "advertise on"
  wait_for 4 advertising "$adapter" >"$WORK/$name.state"
}

# discovered ADAPTER ADDRESS NAME: true if bluetoothd on ADAPTER has a device
# ADDRESS whose Name is NAME.
discovered() {
  [[ $(prop "$(device_path "$1" "$2")" org.bluez.Device1 Name) == "$3" ]]
}

# discovering ADAPTER: true while ADAPTER's discovery is on.
discovering() {
  [[ $(prop "/org/bluez/$1" org.bluez.Adapter1 Discovering) == "boolean true" ]]
}

# start_scan NAME ADAPTER_ADDRESS ADAPTER: start an LE discovery with
# bluetoothctl and wait until the adapter reports it.
start_scan() {
  local name=$1 address=$2 adapter=$3
  btctl_start "$name"
  btctl "$name" "select $address"
  btctl "$name" "scan le"
  wait_for 15 discovering "$adapter"
}

# stop_scan NAME
stop_scan() {
  btctl "$1" "scan off"
  btctl_stop "$1"
}

# device_flag PATH PROPERTY: true if that boolean Device1 property is true.
device_flag() {
  [[ $(prop "$1" org.bluez.Device1 "$2") == "boolean true" ]]
}

# pair CENTRAL_ADDRESS PERIPHERAL_ADDRESS SESSION: pair hci0 with the
# (advertising) peripheral, answering "yes" to the confirmation prompts of
# both bluetoothctl sessions (each registered an agent; the one for the
# peripheral side is SESSION) until the device is Paired and Bonded (at
# most 40 s).
pair() {
  local central=$1 peripheral=$2 session=$3 path try
  path=$(device_path hci0 "$peripheral")
  btctl_start agent
  btctl agent "agent NoInputNoOutput"
  btctl agent "default-agent"
  btctl agent "select $peripheral"
  btctl agent "pairable on"
  btctl agent "select $central"
  btctl agent "pair $peripheral"
  for try in $(seq 20); do
    device_flag "$path" Paired && break
    sleep 2
    btctl agent "yes"
    btctl "$session" "yes"
  done
  wait_for 5 device_flag "$path" Bonded
  local rc=$?
  btctl agent "disconnect $peripheral"
  btctl_stop agent
  return "$rc"
}

# controllers_listed N: bluetoothctl list shows exactly N controllers.
controllers_listed() {
  local n
  n=$(timeout 20 bluetoothctl list | grep -c '^Controller ')
  [[ $n == "$1" ]] || { echo "bluetoothctl list shows $n controllers, want $1"; return 1; }
}

# --------------------------------------------------------------------------
# Checks

common_checks() {
  local host=$1 adapters=$2
  check "LAB_HOST is $host" test "$LAB_HOST" = "$host"
  check "LAB_ADAPTERS is '$adapters'" test "$LAB_ADAPTERS" = "$adapters"
  check "LAB_RESULTS is writable" touch "$LAB_RESULTS/.writable"
  check "LAB_SHARED is writable" touch "$LAB_SHARED/.writable-$host"
  check "HOME is writable" touch "$HOME/.writable"
  check "the checkout is at its host path" test -x "$LAB_CHECKOUT/scripts/lab"
  check "the command runs in the caller's directory" test "$PWD" = "$LAB_CHECKOUT"
  check "lab-bluetoothd is on PATH" command -v lab-bluetoothd
  check "bluetoothd log is being written" test -s "$LAB_BLUETOOTHD_LOG"
  check "btmon capture is being written" test -s "$LAB_RESULTS/btmon.btsnoop"
  check "bluetoothctl lists $(wc -w <<<"$adapters") controller(s)" \
    controllers_listed "$(wc -w <<<"$adapters")"
}

single_checks() {
  local hci0 hci1 pid
  echo "selftest: streaming output from inside the lab"
  common_checks single "hci0 hci1"
  check "LAB_CONTROLLERS is 2" test "$LAB_CONTROLLERS" = 2
  hci0=$(address_of hci0) hci1=$(address_of hci1)
  check "LAB_ADDRESSES names both controllers" test -n "$hci0" -a -n "$hci1"

  # --channels 1 reached bluetoothd.
  check "LAB_CHANNELS is 1" test "$LAB_CHANNELS" = 1
  pid=$(lab-bluetoothd status)
  check "bluetoothd runs with -f and Channels = 1" \
    bash -c "tr '\0' ' ' </proc/$pid/cmdline | grep -q -- '-f ' &&
      grep -qx 'Channels = 1' /run/lab/main.conf"

  # Scan on hci0, then advertise on hci1 with bluetoothctl (see readvertise).
  if start_scan scan "$hci0" hci0; then
    ok "a scan started on hci0"
  else
    not_ok "a scan started on hci0" "see $WORK/scan.log"
  fi
  if start_advertising adv "$hci1" lab-selftest hci1; then
    ok "bluetoothctl registered an advertisement on hci1"
  else
    not_ok "bluetoothctl registered an advertisement on hci1" \
      "$(tail -n1 "$WORK/adv.state"); see $WORK/adv.log"
  fi
  local try found=0
  for try in 1 2 3 4; do
    wait_for 8 discovered hci0 "$hci1" lab-selftest && { found=1; break; }
    readvertise adv hci1
  done
  if ((found)); then
    ok "the scan on hci0 discovered hci1's advertisement (name lab-selftest, try $try)"
  else
    not_ok "the scan on hci0 discovered hci1's advertisement" "see $WORK/scan.log, adv.log"
  fi
  stop_scan scan

  # LE Secure Connections pairing needs the kernel's ECDH (see the DRBG note
  # in scripts/lab.d/host-boot.sh).
  check "the kernel's SMP has ECDH" \
    bash -c "! dmesg | grep 'Unable to create ECDH crypto context'"
  if pair "$hci0" "$hci1" adv; then
    ok "hci0 paired with hci1 (bonded)"
  else
    not_ok "hci0 paired with hci1" "see $WORK/agent.log"
  fi
  check "the pairing used LE Secure Connections" \
    bash -c "btmon -r '$LAB_RESULTS/btmon.btsnoop' | grep -q 'SMP: Pairing Public Key'"
  btctl_stop adv

  # lab-bluetoothd: stop, start, restart.
  check "lab-bluetoothd stop" lab-bluetoothd stop
  check "org.bluez is gone after stop" \
    bash -c "! dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
      org.freedesktop.DBus.NameHasOwner string:org.bluez | grep -q true"
  check "lab-bluetoothd start (waits until powered)" lab-bluetoothd start
  check "lab-bluetoothd restart (waits until powered)" lab-bluetoothd restart
  check "bluetoothd has a new pid after restart" \
    bash -c "test \"\$(lab-bluetoothd status)\" != $pid"
  check "restarted bluetoothd keeps -f" \
    bash -c "tr '\0' ' ' </proc/\$(lab-bluetoothd status)/cmdline | grep -q -- '-f '"
  check "bluetoothctl lists 2 controllers after restart" controllers_listed 2
}

# Two hosts: B registers its advertisement and writes its address to
# $LAB_SHARED/b-advertising. A starts a scan, then asks B to register anew
# by writing a new number to $LAB_SHARED/a-scanning, until it sees B (at most
# 5 tries), then writes $LAB_SHARED/a-done.
host_a_checks() {
  local hci0 peer try found=0
  common_checks a hci0
  hci0=$(address_of hci0)
  if wait_for 90 test -s "$LAB_SHARED/b-advertising"; then
    peer=$(<"$LAB_SHARED/b-advertising")
    ok "host b announced its advertisement ($peer)"
    if start_scan scan "$hci0" hci0; then
      ok "host a started a scan"
    else
      not_ok "host a started a scan" "see $WORK/scan.log"
    fi
    for try in 1 2 3 4 5; do
      echo "$try" >"$LAB_SHARED/a-scanning"
      wait_for 8 discovered hci0 "$peer" lab-host-b && { found=1; break; }
    done
    if ((found)); then
      ok "host a discovered host b's advertisement (name lab-host-b, try $try)"
    else
      not_ok "host a discovered host b's advertisement" "see $WORK/scan.log"
    fi
    stop_scan scan
  else
    not_ok "host b announced its advertisement" "no $LAB_SHARED/b-advertising after 90 s"
  fi
  check "host a's bluetoothd still has only its own controller" controllers_listed 1
  : >"$LAB_SHARED/a-done"
}

# serve_readvertise_requests SECONDS: on host b, register the advertisement
# anew each time host a writes a new number to a-scanning, until a-done.
serve_readvertise_requests() {
  local limit=$1 start=$SECONDS seen="" request
  until [[ -e $LAB_SHARED/a-done ]]; do
    ((SECONDS - start < limit)) || return 1
    request=$(cat "$LAB_SHARED/a-scanning" 2>/dev/null)
    if [[ -n $request && $request != "$seen" ]]; then
      seen=$request
      readvertise adv hci0
    fi
    sleep 0.2
  done
}

host_b_checks() {
  local hci0
  common_checks b hci0
  hci0=$(address_of hci0)
  check "host b's controller address differs from host a's" \
    test "$hci0" != "00:AA:01:00:00:00"
  if start_advertising adv "$hci0" lab-host-b hci0; then
    ok "host b registered an advertisement"
    printf '%s\n' "$hci0" >"$LAB_SHARED/b-advertising"
    if serve_readvertise_requests 150; then
      ok "host a finished while host b advertised"
    else
      not_ok "host a finished while host b advertised" "no $LAB_SHARED/a-done after 150 s"
    fi
  else
    not_ok "host b registered an advertisement" "see $WORK/adv.log"
    printf 'failed\n' >"$LAB_SHARED/b-advertising"
  fi
  btctl_stop adv
}

case ${1-} in
  single) single_checks; exit 42 ;;
  a) host_a_checks ;;
  b) host_b_checks ;;
  *) echo "usage: $0 single|a|b" >&2; exit 2 ;;
esac
exit "$FAILED"
