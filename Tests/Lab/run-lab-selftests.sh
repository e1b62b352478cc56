#!/usr/bin/env bash
# Self-tests of the virtual BLE lab (scripts/lab), run by CI:
#
#   Tests/Lab/run-lab-selftests.sh [--accel kvm]
#
# Three boots, many checks each (a boot costs 10-30 s):
#   1. one host, --channels 1: the guest checks in lab-selftest-guest.sh
#      (environment, two controllers listed, hci1's advertisement discovered
#      from hci0, lab-bluetoothd stop/start/restart), then exits 42: the
#      script must exit 42 too.
#   2. two hosts: host b advertises, host a discovers it; each bluetoothd
#      sees only its own controller.
#   3. one host, a command that hangs: killed at --timeout, exit 124, and
#      the script says so.
# After each boot: the logs exist and no qemu of that run is left running.
# Ends with the line "N passed, M failed"; exits 1 if any check failed.

set -uo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# For time_stamp (LAB_TIMING_FILE); ok and not_ok are this script's own, below.
source "$CHECKOUT/Tests/Lab/common.sh"
LAB="$CHECKOUT/scripts/lab"
RUN_ROOT="$CHECKOUT/results/lab-selftests-$(date -u +%Y%m%d-%H%M%S)-$$"
EXTRA=("$@")
PASSED=0
FAILED=0

# TAP-like lines, "ok - NAME" and "not ok - NAME: WHY", in place of common.sh's ok and fail:
# the guest half (lab-selftest-guest.sh) writes the same kind, which count_guest_results folds
# into these counters.
ok() { printf 'ok - %s\n' "$1"; time_stamp ok "$1"; PASSED=$((PASSED + 1)); }
not_ok() { printf 'not ok - %s: %s\n' "$1" "$2"; time_stamp FAIL "$1: $2"; FAILED=$((FAILED + 1)); }

# expect NAME COMMAND...: ok if COMMAND succeeds.
expect() {
  local name=$1
  shift
  if "$@"; then ok "$name"; else not_ok "$name" "failed: $*"; fi
}

# count_guest_results FILE WHAT: fold the guest's "ok"/"not ok" lines into
# the totals (a missing file is a failure).
count_guest_results() {
  local file=$1 what=$2 line
  if [[ ! -s $file ]]; then
    not_ok "$what: guest checks ran" "no $file"
    return
  fi
  while IFS= read -r line; do
    case $line in
      "ok - "*) PASSED=$((PASSED + 1)) ;;
      "not ok - "*) FAILED=$((FAILED + 1)); echo "  ($what) $line" ;;
    esac
  done <"$file"
}

# run_lab LOG STATUS_VAR ARGS...: run scripts/lab, output (both streams)
# shown and kept in LOG; its exit status goes to STATUS_VAR; the wall time
# in seconds to LAB_SECONDS.
run_lab() {
  local log=$1 var=$2 start=$SECONDS
  shift 2
  "$LAB" "$@" 2>&1 | tee "$log"
  printf -v "$var" '%s' "${PIPESTATUS[0]}"
  LAB_SECONDS=$((SECONDS - start))
}

# no_qemu_left DIR: no qemu process mentions the results directory DIR
# (read from /proc: procps may not be installed).
no_qemu_left() {
  local f cmdline
  for f in /proc/[0-9]*/cmdline; do
    cmdline=$(tr '\0' ' ' <"$f" 2>/dev/null) || continue
    if [[ $cmdline == *qemu-system* && $cmdline == *"$1"* ]]; then
      echo "still running: ${f%/cmdline}"
      return 1
    fi
  done
}

# logs_present DIR: the per-host logs the lab promises.
logs_present() {
  local dir=$1 f
  for f in bluetoothd.log dbus.log console.log; do
    [[ -s $dir/$f ]] || { echo "missing or empty: $dir/$f"; return 1; }
  done
  # btmon -w writes a btsnoop file: it starts with "btsnoop\0".
  [[ $(head -c 7 "$dir/btmon.btsnoop" 2>/dev/null) == btsnoop ]] ||
    { echo "no btsnoop capture in $dir/btmon.btsnoop"; return 1; }
}

# ready_seconds LOG: the readiness time the lab printed ("ready in X s").
ready_seconds() {
  sed -n "s/^lab: $1 ready in \([0-9.]*\) s.*/\1/p" "$2" | tail -n1
}

test_single_host() {
  local dir="$RUN_ROOT/single" log="$RUN_ROOT/single.out" status
  echo "# boot 1: one host, two controllers, --channels 1"
  run_lab "$log" status run --channels 1 --timeout 300 --results "$dir" "${EXTRA[@]}" \
    -- Tests/Lab/lab-selftest-guest.sh single
  expect "one host: the command's status (42) is the script's" test "$status" = 42
  expect "one host: the command's output streamed to the terminal" \
    grep -q '^selftest: streaming output from inside the lab$' "$log"
  expect "one host: the output is kept in output.log" \
    grep -q '^selftest: streaming' "$dir/output.log"
  expect "one host: a failing status prints the results path" \
    grep -q "^lab: logs: $dir" "$log"
  expect "one host: logs present" logs_present "$dir"
  expect "one host: no qemu left running" no_qemu_left "$dir"
  count_guest_results "$dir/selftest.txt" "one host"
  SINGLE_READY=$(ready_seconds "host single" "$log")
  expect "one host: readiness time printed" test -n "$SINGLE_READY"
}

test_two_hosts() {
  local dir="$RUN_ROOT/two-host" log="$RUN_ROOT/two-host.out" status
  echo "# boot 2: two hosts"
  run_lab "$log" status two-host --timeout 300 --results "$dir" "${EXTRA[@]}" \
    --a 'Tests/Lab/lab-selftest-guest.sh a' --b 'Tests/Lab/lab-selftest-guest.sh b'
  expect "two hosts: both commands passed (status 0)" test "$status" = 0
  expect "two hosts: output prefixed [a] and [b]" \
    bash -c "grep -q '^\[a\] ok - ' '$log' && grep -q '^\[b\] ok - ' '$log'"
  expect "two hosts: host a logs present" logs_present "$dir/a"
  expect "two hosts: host b logs present" logs_present "$dir/b"
  expect "two hosts: no qemu left running" no_qemu_left "$dir"
  count_guest_results "$dir/a/selftest.txt" "host a"
  count_guest_results "$dir/b/selftest.txt" "host b"
  TWO_READY=$(sed -n 's/^lab: both hosts ready in \([0-9.]*\) s.*/\1/p' "$log")
  expect "two hosts: readiness time printed" test -n "$TWO_READY"
}

test_timeout() {
  local dir="$RUN_ROOT/timeout" log="$RUN_ROOT/timeout.out" status limit=30
  echo "# boot 3: a command that hangs, --timeout $limit"
  run_lab "$log" status run --controllers 1 --timeout "$limit" --results "$dir" "${EXTRA[@]}" \
    -- sh -c 'echo hanging now; sleep 100000'
  expect "timeout: the script exits 124" test "$status" = 124
  expect "timeout: the command had started" grep -q '^hanging now$' "$log"
  expect "timeout: the script says the command was killed at --timeout" \
    grep -q "did not finish within --timeout $limit s" "$log"
  expect "timeout: it ended within --timeout + 20 s (took ${LAB_SECONDS} s)" \
    test "$LAB_SECONDS" -le $((limit + 20))
  expect "timeout: no qemu left running" no_qemu_left "$dir"
}

main() {
  # The guest commands below are relative to the checkout.
  cd "$CHECKOUT" || exit 1
  mkdir -p "$RUN_ROOT"
  if ! "$LAB" check; then
    not_ok "the lab's tools are installed" "see above"
    echo "$PASSED passed, $FAILED failed"
    exit 1
  fi
  test_single_host
  test_two_hosts
  test_timeout
  echo "# readiness: one host ${SINGLE_READY:-?} s (target 15 s)," \
    "two hosts ${TWO_READY:-?} s (target 30 s); results in $RUN_ROOT"
  echo "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
}

main
