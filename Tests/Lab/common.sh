# shellcheck shell=bash
# Shell helpers shared by the lab suites; source it: `source Tests/Lab/common.sh`.

# --- Checks and the last line ----------------------------------------------------------------
# A check prints one line, "ok   TEXT" or "FAIL TEXT". Tests/Lab/run-all counts the lines that
# match '^(\[[ab]\] )?ok ' and '^(\[[ab]\] )?(FAIL|not ok)' (scripts/lab two-host adds the
# "[a] " or "[b] " itself) and reads the suite's status; finish_suite prints the last line,
# "N passed, M failed", and exits 1 if any check failed. The counters start here.
# Tests/Lab/selfcheck-helpers.sh checks all of this without a VM.
passed=0
failed=0

# With LAB_TIMING_FILE set, ok and fail also append "SECONDS ok|FAIL TEXT" to that file:
# SECONDS since this file was sourced (to 0.1 s), TEXT on one line; a run then shows where each
# suite's time goes. Standard output and error stay the same, and a file that cannot be written
# is skipped silently. A relative name is taken under $LAB_RESULTS (in the lab: the guest's
# results directory, which is kept on the host); without LAB_RESULTS (a script on the host, such
# as the selftests' driver) a relative name stamps nothing, so no file lands in the checkout.
lab_timing_start=${EPOCHREALTIME//[!0-9]/}
lab_timing_start=${lab_timing_start:-$((SECONDS * 1000000))}
lab_timing_file=${LAB_TIMING_FILE-}
if [[ -n $lab_timing_file && $lab_timing_file != /* ]]; then
  lab_timing_file=${LAB_RESULTS:+$LAB_RESULTS/$lab_timing_file}
fi

# time_stamp KIND TEXT...: KIND's line in LAB_TIMING_FILE (see above); nothing without it.
time_stamp() {
  [[ -n $lab_timing_file ]] || return 0
  local kind=$1 now=${EPOCHREALTIME//[!0-9]/} text us
  shift
  text=$*
  now=${now:-$((SECONDS * 1000000))}
  us=$((now - lab_timing_start))
  { printf '%d.%d %s %s\n' $((us / 1000000)) $((us / 100000 % 10)) "$kind" "${text//$'\n'/ }" \
    >>"$lab_timing_file"; } 2>/dev/null
  return 0
}

ok() { echo "ok   $*"; time_stamp ok "$*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; time_stamp FAIL "$*"; failed=$((failed + 1)); }

# check DESCRIPTION COMMAND...: ok if COMMAND succeeds, else FAIL (COMMAND's output is its own).
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

# check_status NAME DETAIL...: ok NAME when $status is 0, else FAIL "NAME: DETAIL". The caller
# sets the test's status on the line before (`status=$?`): the command substitutions in the
# arguments would otherwise replace $? before check_status could read it.
# shellcheck disable=SC2154 # status is the caller's
check_status() {
  local name=$1
  shift
  if ((status == 0)); then ok "$name"; else fail "$name: $*"; fi
}

# finish_suite [LABEL]: prints the last line, "[LABEL: ]N passed, M failed", and exits: 1 if any
# check failed, else 0.
finish_suite() {
  echo "${1:+$1: }$passed passed, $failed failed"
  ((failed == 0))
  exit
}

# show FILE [BYTES]: the first BYTES (default 300) of $OUT/FILE on one line, for a check's detail.
show() { head -c "${2:-300}" "$OUT/$1" 2>/dev/null | tr '\n' ' '; }

# address_of hciN: the controller's address, from LAB_ADDRESSES ("hci0=AA:.. hci1=BB:..").
address_of() {
  local pair
  for pair in ${LAB_ADDRESSES-}; do [[ ${pair%%=*} == "$1" ]] && echo "${pair#*=}"; done
}

# --- Waiting and reading bluetoothd ----------------------------------------------------------
# wait_discovering [ADAPTER] [SECONDS]: waits (default hci0, at most 30 s) until the adapter is
# discovering, i.e. until the scan of the command just started is on. The emulated controller
# reports an advertiser only at the moment advertising or scanning switches on, and the kernel
# drops a report that comes while its discovery is still starting; so an advertisement must
# switch on under a running scan (docs/lab.md).
wait_discovering() {
  local adapter=${1:-hci0} n=$((${2:-30} * 5))
  until busctl --system get-property org.bluez "/org/bluez/$adapter" org.bluez.Adapter1 \
    Discovering 2>/dev/null | grep -q true; do
    ((n-- > 0)) || { echo "# $adapter was not discovering after ${2:-30} s"; return 1; }
    sleep 0.2
  done
}

# wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds, at most SECONDS.
wait_for() {
  local limit=$1 start=$SECONDS
  shift
  until "$@"; do
    ((SECONDS - start < limit)) || return 1
    sleep 0.2
  done
}

# dump_stacks PID FILE: every thread's stack of a process that seems to hang, into FILE (gdb,
# which scripts/setup installs; the guest sees the host's /usr), before it is killed.
dump_stacks() {
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$1" -batch -nx -ex "thread apply all bt" >"$2" 2>&1
  else
    echo "no gdb: no stacks" >"$2"
  fi
}

# prop PATH INTERFACE NAME: a property of org.bluez in dbus-send's literal form, without the
# "variant" prefix (dbus-send only; python is not assumed).
prop() {
  dbus-send --system --print-reply=literal --reply-timeout=3000 --dest=org.bluez "$1" \
    org.freedesktop.DBus.Properties.Get "string:$2" "string:$3" 2>/dev/null |
    xargs | sed 's/^variant //'
}

# some_chunks A B: every 512-byte chunk of B is one of A's (as often as A has it), in any
# order: what a plain receiver may print over EATT, where a chunk that arrives after EOM is lost.
some_chunks() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import collections, sys
def chunks(path):
    data = open(path, "rb").read()
    return collections.Counter(data[i:i + 512] for i in range(0, len(data), 512))
sent, got = chunks(sys.argv[1]), chunks(sys.argv[2])
sys.exit(0 if got and not (got - sent) else 1)
PY
}

# same_chunks A B: the two files hold the same 512-byte chunks, in any order.
same_chunks() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
def chunks(path):
    data = open(path, "rb").read()
    return sorted(data[i:i + 512] for i in range(0, len(data), 512))
sys.exit(0 if chunks(sys.argv[1]) == chunks(sys.argv[2]) else 1)
PY
}
