#!/usr/bin/env bash
# Checks the lab suites' shared helpers (Tests/Lab/common.sh) without a VM: what ok, fail,
# check, check_status and finish_suite print, count and return, read with the very patterns
# Tests/Lab/run-all counts a suite's output with (also behind scripts/lab two-host's "[a] " and
# "[b] " prefixes); that LAB_TIMING_FILE adds its side file and changes nothing else; and that
# every suite sources common.sh and keeps no second copy of a shared helper.
#
#   Tests/Lab/selfcheck-helpers.sh
#
# Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed. Takes
# about a second; needs bash, grep and sed only.
set -u
cd "$(dirname "$0")/../.." || exit 1
COMMON=$PWD/Tests/Lab/common.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/selfcheck-helpers.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# This script's own counters and lines: the helpers under test are not used to report on
# themselves.
hc_passed=0
hc_failed=0
pass() { echo "ok   $*"; hc_passed=$((hc_passed + 1)); }
flunk() { echo "FAIL $*"; hc_failed=$((hc_failed + 1)); }
expect_same() { # expect_same DESCRIPTION EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then pass "$1"; else flunk "$1: want [${2//$'\n'/|}], got [${3//$'\n'/|}]"; fi
}

# run-all's two patterns, read from run-all itself so that a change there is checked here too.
OK_LINE=$(sed -n "s/^  p=\$(grep -cE '\(.*\)' \"\$1\")\$/\1/p" Tests/Lab/run-all)
FAIL_LINE=$(sed -n "s/^FAIL_LINE='\(.*\)'\$/\1/p" Tests/Lab/run-all)
expect_same "run-all's ok pattern found" "^(\[[ab]\] )?ok " "$OK_LINE"
expect_same "run-all's FAIL pattern found" "^(\[[ab]\] )?(FAIL|not ok)" "$FAIL_LINE"

# suite NAME [ENV...]: runs $WORK/NAME.sh (which sources common.sh) with a clean lab
# environment plus ENV; its stdout in NAME.out, stderr in NAME.err, status in NAME.rc.
suite() {
  local name=$1
  shift
  (cd "$WORK" && env -u LAB_TIMING_FILE -u LAB_RESULTS -u LAB_ADDRESSES -u OUT "$@" \
    COMMON="$COMMON" bash "$WORK/$name.sh" >"$WORK/$name.out" 2>"$WORK/$name.err")
  echo $? >"$WORK/$name.rc"
}
counted() { # counted PATTERN FILE [PREFIX]: how many lines run-all's PATTERN counts
  sed "s/^/${3-}/" "$2" | grep -cE "$1"
}

# --- a suite whose checks all pass --------------------------------------------------------------
cat >"$WORK/green.sh" <<'EOF'
set -u
source "$COMMON"
ok "first check"
ok two words
check "a command that succeeds" true
status=0
check_status "a status of 0" "its detail is not shown"
finish_suite
echo "not reached"
EOF
suite green
expect_same "all passed: the exact lines, then 'N passed, 0 failed'" \
  "ok   first check
ok   two words
ok   a command that succeeds
ok   a status of 0
4 passed, 0 failed" "$(cat "$WORK/green.out")"
expect_same "all passed: status 0 (finish_suite exits)" 0 "$(cat "$WORK/green.rc")"
expect_same "all passed: nothing on stderr under set -u" "" "$(cat "$WORK/green.err")"

# --- a suite with failures, a label and an EXIT trap --------------------------------------------
cat >"$WORK/red.sh" <<'EOF'
set -u
source "$COMMON"
trap 'echo "trap ran" >&2' EXIT
ok "x"
fail "y: exit 3"
check "a command that fails" false
status=1
check_status "a status of 1" "exit 5:" "and more"
check "a command with output" sh -c 'echo its own line; exit 0'
fail "two" "arguments"
ok "after"
finish_suite "label (a)"
echo "not reached"
EOF
suite red
expect_same "failures: the exact lines, then 'LABEL: N passed, M failed'" \
  "ok   x
FAIL y: exit 3
FAIL a command that fails
FAIL a status of 1: exit 5: and more
its own line
ok   a command with output
FAIL two arguments
ok   after
label (a): 3 passed, 4 failed" "$(cat "$WORK/red.out")"
expect_same "failures: status 1 after the EXIT trap ran" "1 trap ran" \
  "$(cat "$WORK/red.rc") $(cat "$WORK/red.err")"

for prefix in "" "[a] " "[b] "; do
  expect_same "run-all counts 3 ok and 4 FAIL lines${prefix:+ behind \"$prefix\"}" "3 4" \
    "$(counted "$OK_LINE" "$WORK/red.out" "$prefix") $(counted "$FAIL_LINE" "$WORK/red.out" "$prefix")"
  expect_same "run-all counts the passing suite's 4 ok lines and no FAIL${prefix:+ behind \"$prefix\"}" \
    "4 0" "$(counted "$OK_LINE" "$WORK/green.out" "$prefix") $(counted "$FAIL_LINE" "$WORK/green.out" "$prefix")"
done
# The TAP-like lines of the lab's self-tests (run-lab-selftests.sh, lab-selftest-guest.sh).
printf 'ok - a\nnot ok - b: why\n' >"$WORK/tap.out"
expect_same "run-all counts 'ok - ' and 'not ok - ' lines behind \"[a] \"" "1 1" \
  "$(counted "$OK_LINE" "$WORK/tap.out" "[a] ") $(counted "$FAIL_LINE" "$WORK/tap.out" "[a] ")"

# --- statuses and counters ----------------------------------------------------------------------
cat >"$WORK/statuses.sh" <<'EOF'
set -u
source "$COMMON"
ok a >/dev/null; s1=$?
fail b >/dev/null; s2=$?
check c false >/dev/null; s3=$?
check d true >/dev/null; s4=$?
status=1
check_status e >/dev/null; s5=$?
status=0
check_status f >/dev/null; s6=$?
echo "$s1 $s2 $s3 $s4 $s5 $s6 passed=$passed failed=$failed"
EOF
suite statuses
expect_same "ok, fail, check, check_status return 0 and count" \
  "0 0 0 0 0 0 passed=3 failed=3" "$(cat "$WORK/statuses.out")"

# --- LAB_TIMING_FILE ----------------------------------------------------------------------------
suite red LAB_TIMING_FILE="$WORK/timing.txt"
cp "$WORK/red.out" "$WORK/red-timed.out"
expect_same "LAB_TIMING_FILE: stdout, stderr and status unchanged" \
  "$(cat "$WORK/red.out" "$WORK/red.err" "$WORK/red.rc")" \
  "$(suite red; cat "$WORK/red.out" "$WORK/red.err" "$WORK/red.rc")"
expect_same "LAB_TIMING_FILE: one 'SECONDS ok|FAIL TEXT' line per check, in order" \
  "ok x|FAIL y: exit 3|FAIL a command that fails|FAIL a status of 1: exit 5: and more|ok a command with output|FAIL two arguments|ok after" \
  "$(sed -E 's/^[0-9]+\.[0-9] //' "$WORK/timing.txt" 2>&1 | paste -sd '|')"
expect_same "LAB_TIMING_FILE: every line starts with seconds to 0.1 s" 7 \
  "$(grep -cE '^[0-9]+\.[0-9] (ok|FAIL) ' "$WORK/timing.txt" 2>&1)"

cat >"$WORK/timed.sh" <<'EOF'
set -u
source "$COMMON"
ok "before the sleep"
sleep 0.5
fail "$(printf 'two\nlines')"
EOF
mkdir -p "$WORK/results"
suite timed LAB_TIMING_FILE=relative.txt LAB_RESULTS="$WORK/results"
expect_same "LAB_TIMING_FILE: a relative name goes under LAB_RESULTS; TEXT on one line" \
  "ok before the sleep|FAIL two lines" "$(sed -E 's/^[0-9.]+ //' "$WORK/results/relative.txt" 2>&1 | paste -sd '|')"
read -r t1 t2 < <(cut -d' ' -f1 "$WORK/results/relative.txt" 2>/dev/null | paste -sd ' ')
if awk -v a="${t1:-x}" -v b="${t2:-x}" 'BEGIN { exit !(a < 0.3 && b - a >= 0.4 && b - a < 3) }'; then
  pass "LAB_TIMING_FILE: the seconds count from the sourcing ($t1, then $t2 after a 0.5 s sleep)"
else
  flunk "LAB_TIMING_FILE: seconds $t1 then $t2 around a 0.5 s sleep"
fi
mkdir -p "$WORK/cwd/elsewhere"
cat >"$WORK/moved.sh" <<'EOF'
set -u
cd cwd
source "$COMMON"
cd elsewhere
ok "after a cd"
EOF
suite moved LAB_TIMING_FILE=moved.txt
expect_same "LAB_TIMING_FILE: without LAB_RESULTS, a relative name stamps nothing" \
  "absent absent" "$([[ -e $WORK/cwd/moved.txt ]] && echo present || echo absent) $([[ -e $WORK/cwd/elsewhere/moved.txt ]] && echo present || echo absent)"
suite red LAB_TIMING_FILE=/nonexistent-dir/timing.txt
expect_same "LAB_TIMING_FILE unwritable: stdout, stderr and status unchanged" \
  "$(cat "$WORK/red-timed.out"; echo 'trap ran'; echo 1)" \
  "$(cat "$WORK/red.out" "$WORK/red.err" "$WORK/red.rc")"

# --- show and address_of ------------------------------------------------------------------------
printf 'line one\nline two\n' >"$WORK/shown"
head -c 500 /dev/zero | tr '\0' x >"$WORK/long"
cat >"$WORK/others.sh" <<'EOF'
set -u
source "$COMMON"
OUT=$PWD
echo "[$(show shown)] [$(show long | wc -c)] [$(show long 7)] [$(show missing)]"
LAB_ADDRESSES="hci0=00:AA:01:00:00:00 hci1=00:AA:01:01:00:01"
echo "[$(address_of hci1)] [$(address_of hci9)]"
EOF
suite others
expect_same "show: one line, 300 bytes by default, BYTES, nothing for a missing file" \
  "[line one line two ] [300] [xxxxxxx] []
[00:AA:01:01:00:01] []" "$(cat "$WORK/others.out" "$WORK/others.err")"

# --- the suites ---------------------------------------------------------------------------------
# Every suite that reports checks sources common.sh; only the suites whose helpers really differ
# (each says why) define their own; no suite defines a second finish_suite or check_status.
SUITES=(Tests/Lab/*.sh Tests/Lab/fleet Tests/Lab/interop Tests/Lab/run-all)
OWN_OK=" Tests/Lab/lab-selftest-guest.sh Tests/Lab/run-lab-selftests.sh Tests/Lab/selfcheck-helpers.sh "
OWN_CHECK=" Tests/Lab/faults.sh Tests/Lab/lab-selftest-guest.sh "
before=$hc_failed
for f in "${SUITES[@]}"; do
  [[ $f == Tests/Lab/common.sh ]] && continue
  bash -n "$f" 2>"$WORK/syntax.err" || flunk "$f: bash -n: $(head -c 300 "$WORK/syntax.err")"
  # shellcheck disable=SC2016 # the patterns match a literal $CHECKOUT and $(dirname ...)
  if grep -qE '^\s*(ok|fail|check|check_status|finish_suite) ' "$f" && [[ $f != Tests/Lab/selfcheck-helpers.sh ]] &&
    ! grep -qE '^source (Tests/Lab/|"\$CHECKOUT/Tests/Lab/|"\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/)common\.sh' "$f"; then
    flunk "$f reports checks but does not source common.sh"
  fi
  if [[ $OWN_OK != *" $f "* ]] && grep -qE '^\s*(ok|fail)\(\)' "$f"; then
    flunk "$f defines its own ok or fail (common.sh has them)"
  fi
  if [[ $OWN_CHECK != *" $f "* ]] && grep -qE '^\s*check\(\)' "$f"; then
    flunk "$f defines its own check (common.sh has check and check_status)"
  fi
  if grep -qE '^\s*(check_status|finish_suite|time_stamp)\(\)' "$f"; then
    flunk "$f defines a second check_status, finish_suite or time_stamp"
  fi
done
((hc_failed > before)) ||
  pass "every suite: bash -n, sources common.sh, no second copy of a shared helper (${#SUITES[@]} files)"

echo "$hc_passed passed, $hc_failed failed"
((hc_failed == 0))
