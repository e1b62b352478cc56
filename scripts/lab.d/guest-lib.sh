# shellcheck shell=bash
# Guest side: helpers shared by the lab's init (guest-init) and by
# lab-bluetoothd. Runs inside the lab VM only.
#
# State kept in /run/lab/state (sourced), written by guest-init:
#   LAB_BLUETOOTHD_CONF   main.conf for bluetoothd -f, or empty for stock
#   LAB_BLUETOOTHD_EXPERIMENTAL  1: bluetoothd -E (experimental interfaces)
#   LAB_TRACE             0: no btmon, bluetoothd without -d (scripts/lab --no-trace)
#   LAB_BLUETOOTHD_LOG    bluetoothd's log (appended on every start)
#   LAB_EXPECTED_ADAPTERS how many controllers must be powered to be ready

LAB_RUN=/run/lab
BLUETOOTHD_PID_FILE=$LAB_RUN/bluetoothd.pid

# lab_log MESSAGE: a line on the guest console, stamped with the uptime.
lab_log() {
  local up
  read -r up _ </proc/uptime
  printf '[%7s] lab: %s\n' "$up" "$*" >/dev/console
}

# lab_uptime_s: whole seconds since the guest kernel started.
lab_uptime_s() {
  local up
  read -r up _ </proc/uptime
  printf '%s\n' "${up%.*}"
}

# lab_bluetoothd_path: the bluetoothd binary.
lab_bluetoothd_path() {
  local p
  for p in /usr/libexec/bluetooth/bluetoothd /usr/lib/bluetooth/bluetoothd /usr/sbin/bluetoothd; do
    [[ -x $p ]] && { printf '%s\n' "$p"; return 0; }
  done
  return 1
}

lab_load_state() {
  # shellcheck source=/dev/null
  source "$LAB_RUN/state"
}

# lab_bluetoothd_pid: the running bluetoothd's pid, or fail.
lab_bluetoothd_pid() {
  local pid
  [[ -s $BLUETOOTHD_PID_FILE ]] || return 1
  pid=$(<"$BLUETOOTHD_PID_FILE")
  kill -0 "$pid" 2>/dev/null || return 1
  printf '%s\n' "$pid"
}

# lab_bluetoothd_start: start bluetoothd -n -d (-n alone with --no-trace; with -f CONF if set),
# appending to its log. Does not wait for readiness.
lab_bluetoothd_start() {
  lab_load_state
  if lab_bluetoothd_pid >/dev/null; then
    echo "lab-bluetoothd: already running" >&2
    return 0
  fi
  local -a args=(-n)
  [[ ${LAB_TRACE-1} == 0 ]] || args+=(-d)
  [[ -n $LAB_BLUETOOTHD_CONF ]] && args+=(-f "$LAB_BLUETOOTHD_CONF")
  [[ ${LAB_BLUETOOTHD_EXPERIMENTAL-} == 1 ]] && args+=(-E)
  printf '=== lab: starting bluetoothd %s (uptime %s s)\n' "${args[*]}" \
    "$(lab_uptime_s)" >>"$LAB_BLUETOOTHD_LOG"
  setsid "$(lab_bluetoothd_path)" "${args[@]}" </dev/null >>"$LAB_BLUETOOTHD_LOG" 2>&1 &
  printf '%s\n' "$!" >"$BLUETOOTHD_PID_FILE"
}

# lab_bluetoothd_stop: SIGTERM, then SIGKILL after 5 s; waits until gone.
lab_bluetoothd_stop() {
  local pid n=50
  pid=$(lab_bluetoothd_pid) || { rm -f "$BLUETOOTHD_PID_FILE"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  while ((n-- > 0)) && kill -0 "$pid" 2>/dev/null; do lab_sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    n=20
    while ((n-- > 0)) && kill -0 "$pid" 2>/dev/null; do lab_sleep 0.1; done
  fi
  # bluetoothd's bus name must be gone before a new one starts.
  n=50
  while ((n-- > 0)) && lab_bluez_on_bus; do lab_sleep 0.1; done
  rm -f "$BLUETOOTHD_PID_FILE"
  lab_load_state
  printf '=== lab: bluetoothd stopped (uptime %s s)\n' "$(lab_uptime_s)" >>"$LAB_BLUETOOTHD_LOG"
}

# lab_bluez_on_bus: true if org.bluez has an owner on the system bus.
lab_bluez_on_bus() {
  dbus-send --system --print-reply=literal --reply-timeout=2000 \
    --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.NameHasOwner string:org.bluez 2>/dev/null | grep -q true
}

# lab_adapter_property ADAPTER NAME: print an org.bluez.Adapter1 property
# in dbus-send's literal form (e.g. "variant boolean true").
lab_adapter_property() {
  dbus-send --system --print-reply=literal --reply-timeout=2000 --dest=org.bluez \
    "/org/bluez/$1" org.freedesktop.DBus.Properties.Get \
    string:org.bluez.Adapter1 "string:$2" 2>/dev/null | xargs
}

# lab_list_adapters: set LAB_ADAPTER_LIST to the kernel's controllers
# (hci0 hci1 ...), in numeric order. Bash only: no process is started.
lab_list_adapters() {
  local d n
  local -a by_number=()
  for d in /sys/class/bluetooth/hci*; do
    n=${d##*/hci}
    [[ $n =~ ^[0-9]+$ ]] && by_number[n]=hci$n
  done
  LAB_ADAPTER_LIST=("${by_number[@]}")
}

# lab_adapters: the controllers as one line ("hci0 hci1").
lab_adapters() {
  lab_list_adapters
  printf '%s\n' "${LAB_ADAPTER_LIST[*]}"
}

# lab_sleep SECONDS: sleep without starting a process (exec costs ~0.1 s
# of guest CPU under TCG).
lab_sleep() {
  if [[ -z ${LAB_SLEEP_FD-} ]]; then
    [[ -p $LAB_RUN/sleep.fifo ]] || mkfifo "$LAB_RUN/sleep.fifo" 2>/dev/null
    exec {LAB_SLEEP_FD}<>"$LAB_RUN/sleep.fifo" || { sleep "$1"; return 0; }
  fi
  read -r -t "$1" -u "$LAB_SLEEP_FD" _ || true
}

# lab_all_powered: true if LAB_EXPECTED_ADAPTERS controllers exist and
# bluetoothd reports each one Powered. Sets LAB_ADDRESSES
# ("hci0=00:AA:01:00:00:00 hci1=...") as a side effect.
lab_all_powered() {
  lab_list_adapters
  local -a adapters=("${LAB_ADAPTER_LIST[@]}")
  ((${#adapters[@]} == LAB_EXPECTED_ADAPTERS)) || return 1
  lab_bluez_on_bus || return 1
  local a props addresses=""
  for a in "${adapters[@]}"; do
    props=$(dbus-send --system --print-reply=literal --reply-timeout=2000 --dest=org.bluez \
      "/org/bluez/$a" org.freedesktop.DBus.Properties.GetAll string:org.bluez.Adapter1 \
      2>/dev/null) || return 1
    [[ $props =~ Powered[[:space:]]+variant[[:space:]]+boolean[[:space:]]+true ]] || return 1
    [[ $props =~ Address[[:space:]]+variant[[:space:]]+([0-9A-F:]{17}) ]] || return 1
    addresses+=" $a=${BASH_REMATCH[1]}"
  done
  LAB_ADDRESSES=${addresses# }
}

# Readiness is "every controller Powered in bluetoothd", asked over D-Bus.
# Under TCG one dbus-send costs 0.1-0.6 s of guest CPU, which polling would
# take away from bluetoothd while it starts. So the loop below follows
# bluetoothd's debug log instead (read with bash builtins, no process) and
# asks D-Bus when the log says every adapter was enabled, and otherwise
# only every 2 s (in case the log's wording changes).

declare -A LAB_ENABLED=()
LAB_LOG_FD=""
LAB_LOG_PARTIAL=""

# lab_follow_log: read bluetoothd's log lines written since the last call;
# LAB_ENABLED holds the adapters the current bluetoothd has enabled.
lab_follow_log() {
  local line adapter
  if [[ -z $LAB_LOG_FD ]]; then
    exec {LAB_LOG_FD}<"$LAB_BLUETOOTHD_LOG" || { LAB_LOG_FD=""; return 0; }
    # Start at the current bluetoothd's start line: what came before is an earlier
    # bluetoothd's. Read line by line in bash from the top, a suite's debug log (16,000 lines
    # by the end of the transfer suite) took 30-85 s under TCG at every lab-bluetoothd start,
    # and the transfer suite ran past its 600 s. dd moves the descriptor's offset, which
    # this shell shares, with one read.
    local skip
    skip=$(LC_ALL=C grep -ab '^=== lab: starting bluetoothd' "$LAB_BLUETOOTHD_LOG" | tail -n 1)
    skip=${skip%%:*}
    if [[ -n $skip ]] && ((skip > 0)); then
      dd bs="$skip" count=1 of=/dev/null status=none <&"$LAB_LOG_FD" || true
    fi
  fi
  while IFS= read -r line <&"$LAB_LOG_FD"; do
    line=$LAB_LOG_PARTIAL$line
    LAB_LOG_PARTIAL=""
    case $line in
      "=== lab: starting bluetoothd"*) LAB_ENABLED=() ;;
      *"adapter /org/bluez/"*" has been enabled"*)
        adapter=${line##*adapter /org/bluez/}
        LAB_ENABLED[${adapter%% *}]=1
        ;;
      *"adapter /org/bluez/"*" has been disabled"*)
        adapter=${line##*adapter /org/bluez/}
        unset "LAB_ENABLED[${adapter%% *}]"
        ;;
    esac
  done
  # An unfinished last line is kept for the next call.
  LAB_LOG_PARTIAL+=$line
}

# lab_log_says_enabled: true if the log shows every controller enabled.
lab_log_says_enabled() {
  lab_list_adapters
  local -a adapters=("${LAB_ADAPTER_LIST[@]}")
  ((${#adapters[@]} == LAB_EXPECTED_ADAPTERS)) || return 1
  local a
  for a in "${adapters[@]}"; do
    [[ -n ${LAB_ENABLED[$a]-} ]] || return 1
  done
}

LAB_LAST_ASK=0

# lab_ready_step: one step of the readiness loop (call every 0.1 s); true
# once D-Bus confirms every controller Powered (LAB_ADDRESSES then set).
lab_ready_step() {
  local now=${EPOCHREALTIME/./}
  lab_follow_log
  if lab_log_says_enabled || ((now - LAB_LAST_ASK >= 2000000)); then
    LAB_LAST_ASK=$now
    lab_all_powered
  else
    return 1
  fi
}

# lab_wait_ready SECONDS: wait until every controller is powered in
# bluetoothd, for at most SECONDS. Fails with a reason on stderr.
lab_wait_ready() {
  local limit=$1 start now
  lab_load_state
  start=${EPOCHREALTIME/./}
  until lab_ready_step; do
    now=${EPOCHREALTIME/./}
    if (((now - start) / 1000000 >= limit)); then
      echo "controllers [$(lab_adapters)] (want $LAB_EXPECTED_ADAPTERS)" \
        "not all powered in bluetoothd after ${limit} s" >&2
      return 1
    fi
    lab_sleep 0.1
  done
}
