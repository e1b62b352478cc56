#!/usr/bin/env bash
# Lab suite for `blekit serve`, between two hosts (each its own bluetoothd, as a phone and a
# gadget would be): host B serves the bundled profiles one after the other; host A explores,
# reads, subscribes and writes with blekit's own verbs and with bleak (an independent central):
#
#   scripts/lab two-host --env BLEKIT=$PWD/.build/debug/blekit \
#     --a Tests/Lab/serve.sh --b Tests/Lab/serve.sh
#
# Why two hosts: with both adapters in one bluetoothd 5.66, bleak's central can see
# Device1.Connected stay false after Connect (interop-bleak.sh, docs/lab.md).
# Phases, each "go-NAME" (A's scan is on: B may start serving; the emulated air reports an
# advertiser only when its advertising switches on) then "done-NAME" (B stops) in $LAB_SHARED;
# within a phase, A's later commands use B's known address (no scan):
#   hr            heart-rate.json: bleak finds it, reads, subscribes, writes; then blekit's
#                 explore, notify and write
#   thermo        health-thermometer.json: blekit notify on the indicate characteristic (A's
#                 bluetoothd confirms each indication; B reports each confirmation), explore
#   uart          nordic-uart.json: stdin lines notified; A's write request, then its write
#                 commands (write --stdin --without-response: AcquireWrite) out on B's stdout
#   battery, device-information, environmental-sensing: explored; environmental-sensing's
#                 writable descriptor (0x290D of 0x2A6E) written and read back
#   unruly        a profile whose values come from commands that do not behave: one hangs (the
#                 read answers an ATT error after serve's 10 s limit, and the command and what it
#                 started are gone), one writes forever (the read gets 512 bytes at once); then a
#                 hanging read is left running while B stops: nothing of it outlives blekit
# B first checks that bad profiles are refused with exit 2 before the bus is touched. Both
# hosts print "ok"/"FAIL" lines and "N passed, M failed"; the status is 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/serve
SHARED=${LAB_SHARED:-/tmp}
PY=/usr/bin/python3
B_ADDRESS=00:AA:01:01:00:42
export PYTHONPATH=${LAB_PYLIB:-$PWD/.build-lab/pylib}
mkdir -p "$OUT"

# ---------------------------------------------------------------------------------------------
# Host B: the server.
# ---------------------------------------------------------------------------------------------
# serve_phase NAME PROFILE [ARGS...]: waits for go-NAME, serves PROFILE (--json) until
# done-NAME, stops it with SIGTERM; its output in $OUT/NAME.jsonl, its status in RC.
serve_phase() {
  local name=$1 profile=$2
  shift 2
  wait_for 180 test -e "$SHARED/go-$name" || { fail "$name: host A never got ready"; RC=99; return; }
  "$BLEKIT" serve "$profile" -a hci0 --json "$@" >"$OUT/$name.jsonl" 2>"$OUT/$name.err" &
  local pid=$!
  wait_for 180 test -e "$SHARED/done-$name"
  grep -q '"connected"' "$OUT/$name.jsonl" || radio_state "B, no central connected during $name"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  RC=$?
}
# radio_state WHAT: "# " lines on what this host's controller was doing (its links, bluetoothd's
# advertising instances and discovery, the last advertising and scan switches and links in
# btmon's capture), for a phase in which B was not found or not connected: CI keeps a run's
# output, not its guest logs (in CI's run of f7d27e5, B served the thermo phase and A saw
# nothing of it for two minutes; the cause is not known, docs/lab.md).
radio_state() {
  echo "# radio state, $1:"
  hcitool -i hci0 con 2>&1 | tail -n +2 | sed 's/^/#   link: /'
  echo "#   ActiveInstances $(busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.LEAdvertisingManager1 ActiveInstances 2>&1)," \
    "Discovering $(busctl --system get-property org.bluez /org/bluez/hci0 org.bluez.Adapter1 Discovering 2>&1)"
  [[ -s ${LAB_RESULTS:-}/btmon.btsnoop ]] || return 0
  $PY Tests/Lab/hci-timeline.py "$LAB_RESULTS/btmon.btsnoop" 16 2>&1 | sed 's/^/#   hci: /'
}
# events NAME PYTHON: runs the Python condition with `events` (the JSON lines of NAME).
events() {
  $PY - "$OUT/$1.jsonl" "$2" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
def of(kind, **fields):
    return [e for e in events if e["event"] == kind
            and all(e.get(k) == v for k, v in fields.items())]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

host_b() {
  # --- bad profiles: exit 2, one line with the file, the path and the reason; the adapter
  # hci9 does not exist, so a profile checked after the bus was touched would exit 3 instead.
  printf '{"services":[{"uuid":"180d","characteristics":[{"uuid":"2a37","properties":["read"],"value":"x"},{"uuid":"2a3g","properties":["read"],"value":"y"}]}]}' >"$OUT/bad-uuid.json"
  printf '{"services":[{"uuid":"180d","characteristics":[{"uuid":"2a37","properties":["notify"]}]}]}' >"$OUT/no-notifier.json"
  printf '{"services":[{"uuid":"180d"}]}' >"$OUT/no-characteristics.json"
  printf '{\n  "services": [\n    {"uuid": "180d",, }' >"$OUT/syntax.json"
  local bad want
  for bad in "bad-uuid:services\[0\]\.characteristics\[1\]\.uuid: '2a3g' is not a UUID" \
    "no-notifier:services\[0\]\.characteristics\[0\]\.notifier: missing" \
    "no-characteristics:services\[0\]\.characteristics: missing" \
    "syntax:line 3, column 21: not valid JSON"; do
    want=${bad#*:}
    bad=${bad%%:*}
    "$BLEKIT" serve "$OUT/$bad.json" -a hci9 >"$OUT/$bad.out" 2>"$OUT/$bad.err"
    RC=$?
    [[ $RC == 2 && ! -s $OUT/$bad.out && $(wc -l <"$OUT/$bad.err") == 1 ]] \
      && grep -q "$OUT/$bad.json: $want" "$OUT/$bad.err"
    status=$?
    check_status "bad profile ($bad) refused before the bus: exit 2, $(cat "$OUT/$bad.err")" \
      "exit $RC: $(show "$bad.err")"
  done

  # --- heart rate: bleak, then blekit's verbs ---------------------------------------------------
  serve_phase hr profiles/heart-rate.json
  [[ $RC == 0 ]]
  status=$?
  check_status "serve heart-rate: exit 0 on SIGTERM" "exit $RC: $(show hr.err)"
  events hr 'of("serving") and len(of("connected")) >= 2 and of("disconnected")'
  status=$?
  check_status "serve --json: serving; centrals connected (bleak's, blekit's) and disconnected" \
    "$(show hr.jsonl 400)"
  events hr 'any(e["central"] and e["central"].count(":") == 5 and isinstance(e["mtu"], int) and e["mtu"] >= 23 and e["link"] == "LE" for e in of("read", characteristic="2a38"))'
  status=$?
  check_status "serve --json: a read of 2a38 names the central's address, its MTU and the LE link" \
    "$(grep '"read"' "$OUT/hr.jsonl" | head -2 | tr '\n' ' ')"
  events hr 'len([e for e in of("write", characteristic="2a39") if e["hex"] == "01" and e["central"] and isinstance(e["mtu"], int) and not e["withoutResponse"]]) >= 2'
  status=$?
  check_status "serve --json: the writes of 01 to 2a39 (bleak's, blekit's), with the central and MTU" \
    "$(grep '"write"' "$OUT/hr.jsonl" | head -2 | tr '\n' ' ')"
  events hr 'len(of("notified", characteristic="2a37")) >= 5 and len(of("subscribed", characteristic="2a37")) >= 2 and len(of("unsubscribed", characteristic="2a37")) >= 2'
  status=$?
  check_status "serve --json: 2a37 subscribed, notified every second, unsubscribed (twice)" \
    "$(grep -c notified "$OUT/hr.jsonl") notified"

  # --- indications ----------------------------------------------------------------------------
  serve_phase thermo profiles/health-thermometer.json
  events thermo 'len(of("confirmed", characteristic="2a1c")) >= 2'
  status=$?
  check_status "serve health-thermometer: exit $RC, $(grep -c '"confirmed"' "$OUT/thermo.jsonl") indications on 2a1c confirmed" \
    "$(show thermo.jsonl 500) $(show thermo.err)"

  # --- Nordic UART: standard input notified, writes on standard output -------------------------
  wait_for 180 test -e "$SHARED/go-uart"
  # One line every 0.5 s on serve's standard input; the feeder ends (SIGPIPE) once serve has.
  "$BLEKIT" serve profiles/nordic-uart.json -a hci0 >"$OUT/uart.out" 2>"$OUT/uart.err" \
    < <(for i in $(seq 1 120); do echo "uart line $i"; sleep 0.5; done) &
  local pid=$!
  wait_for 180 test -e "$SHARED/done-uart"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  RC=$?
  printf 'hello from Astream line 1\nstream line 2\n' >"$OUT/uart.expected"
  cmp -s "$OUT/uart.expected" "$OUT/uart.out"
  status=$?
  check_status "serve nordic-uart: A's write request, then its write commands, came out on standard output exactly (exit $RC)" \
    "got '$(show uart.out)' $(show uart.err)"

  # --- the other bundled profiles, explored by A -----------------------------------------------
  local profile
  for profile in battery device-information environmental-sensing; do
    serve_phase "$profile" "profiles/$profile.json"
    events "$profile" 'of("connected")'
    status=$?
    check_status "serve $profile: exit $RC, served to host A" "$(show "$profile.err")"
    if [[ $profile == environmental-sensing ]]; then
      events "$profile" '[e["hex"].replace(" ", "") for e in of("write", characteristic="2a6e", descriptor="290d")] == ["013c0000"]'
      status=$?
      check_status "serve environmental-sensing: A's write to descriptor 290d of 2a6e reported" \
        "$(grep '"write"' "$OUT/$profile.jsonl" | head -2 | tr '\n' ' ')"
    fi
  done

  # --- commands that do not behave ---------------------------------------------------------------
  # ffe1 hangs (with a child in its group), ffe2 writes forever and ignores SIGPIPE; each
  # command notes its shell's pid and its child's.
  local pids=$OUT/unruly.pids
  : >"$pids"
  printf '%s' '{"advertise":{"name":"blekit unruly","services":["ffe0"]},"services":[{"uuid":"ffe0","characteristics":[' \
    '{"uuid":"ffe1","properties":["read"],"value":{"command":"sleep 300 & echo $$ $! >> '"$pids"'; wait"}},' \
    '{"uuid":"ffe2","properties":["read"],"value":{"command":"echo $$ >> '"$pids"'; trap \"\" PIPE; yes"}}]}]}' \
    >"$OUT/unruly.json"
  serve_phase unruly "$OUT/unruly.json"
  [[ $RC == 0 ]] && grep -q "did not finish within 10 s" "$OUT/unruly.err"
  status=$?
  check_status "serve unruly: exit 0 on SIGTERM; the hanging command was stopped at 10 s" \
    "exit $RC: $(show unruly.err 500)"
  local pid alive=()
  for pid in $(cat "$pids"); do
    if [[ -e /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
      alive+=("$pid:$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)")
    fi
  done
  [[ $(wc -w <"$pids") -ge 4 && ${#alive[@]} == 0 ]]
  status=$?
  check_status "serve unruly: no command, nor what it started, outlived its read or blekit ($(wc -w <"$pids") pids)" \
    "alive: ${alive[*]}"
  for pid in $(cat "$pids"); do kill -KILL "$pid" 2>/dev/null; done
  finish_suite
}

# ---------------------------------------------------------------------------------------------
# Host A: the centrals.
# ---------------------------------------------------------------------------------------------
# seen_or_state: after a phase's command, the radio's state when it did not see B (exit 6,
# "no device ... was seen"); it leaves RC alone.
seen_or_state() {
  ((RC == 6)) && grep -qs "was seen" "$OUT/$PHASE.err" && radio_state "A, B not seen in $PHASE"
  return 0
}
# start_phase NAME COMMAND...: runs COMMAND (which scans for B) in the background, says go
# once the scan is on; the command's output in $OUT/NAME.out/.err, its pid in PID.
start_phase() {
  local name=$1
  shift
  PHASE=$name
  "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  PID=$!
  wait_discovering hci0 30
  : >"$SHARED/go-$name"
}
# end_phase NAME: tells B to stop, and forgets B so the next phase's scan finds it anew.
end_phase() {
  : >"$SHARED/done-$1"
  busctl --system call org.bluez /org/bluez/hci0 org.bluez.Adapter1 RemoveDevice o \
    "/org/bluez/hci0/dev_${B_ADDRESS//:/_}" >/dev/null 2>&1
  sleep 1
}
# json_check FILE PYTHON: the condition over `tree`, explore --json's object.
json_check() {
  $PY - "$OUT/$1" "$2" <<'PY'
import json, sys
tree = json.loads(open(sys.argv[1]).read().splitlines()[0])
services = {s["uuid"][4:8] if s["uuid"].endswith("-0000-1000-8000-00805f9b34fb") else s["uuid"]: s
            for s in tree["services"]}
def char(service, short):
    return [c for c in services[service]["characteristics"] if c["shortUUID"] == short][0]
def desc(service, short, d):
    return [x for x in char(service, short)["descriptors"] if x["shortUUID"] == d][0]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

host_a() {
  local start=$SECONDS
  # --- heart rate: bleak (an independent central) finds, reads, subscribes, writes -----------
  $PY Tests/Lab/serve-bleak.py heart-rate --adapter hci0 --ready "$SHARED/go-hr" \
    --timeout 40 >"$OUT/bleak-hr.out" 2>"$OUT/bleak-hr.err"
  RC=$?
  version=$($PY -c 'import importlib.metadata as m; print(m.version("bleak"))' 2>/dev/null)
  grep -qx "read-2a38 01" "$OUT/bleak-hr.out" \
    && grep -qx "read-2a29 $(printf blekit | xxd -p)" "$OUT/bleak-hr.out" \
    && grep -qE "^notified-2a37 00[0-9a-f]{2} 00[0-9a-f]{2} 00[0-9a-f]{2}$" "$OUT/bleak-hr.out" \
    && grep -qx "wrote-2a39 01" "$OUT/bleak-hr.out" && ((RC == 0))
  status=$?
  check_status "bleak $version: reads 2a38 and 2a29, gets 3 notifications of 2a37, writes 2a39" \
    "exit $RC: $(show bleak-hr.out 500) $(show bleak-hr.err)"
  echo "# bleak's turn took $((SECONDS - start)) s"

  # --- heart rate: blekit's verbs, at B's known address -------------------------------------
  "$BLEKIT" explore "$B_ADDRESS" --json --timeout 60 >"$OUT/hr.out" 2>"$OUT/hr.err"
  RC=$?
  [[ $RC == 0 ]] && json_check hr.out \
    'char("180d","2a37")["value"] is None and "notify" in char("180d","2a37")["flags"] and char("180d","2a38")["value"] == "01" and "write" in char("180d","2a39")["flags"] and char("180a","2a29")["value"] == "blekit".encode().hex()'
  status=$?
  check_status "explore: heart rate service (2a37 notify, 2a38 = 01, 2a39 write) and 2a29 = blekit" \
    "exit $RC: $(show hr.err) $(show hr.out 500)"
  "$BLEKIT" notify "$B_ADDRESS" 2a37 --count 3 --timeout 30 >"$OUT/notify.out" 2>"$OUT/notify.err"
  RC=$?
  $PY - "$OUT/notify.out" <<'PY'
import sys
values = open(sys.argv[1]).read().split()
assert len(values) == 3 and all(v.startswith("00") and len(v) == 4 for v in values), values
bpm = [int(v[2:], 16) for v in values]
assert all(60 <= b <= 90 for b in bpm) and all(b - a in (1, -30) for a, b in zip(bpm, bpm[1:])), bpm
PY
  status=$?
  check_status "notify 2a37 --count 3: three heart rate measurements, counting up ($(show notify.out))" \
    "exit $RC: $(show notify.out) $(show notify.err)"
  "$BLEKIT" write "$B_ADDRESS" 2a39 01 >"$OUT/write.out" 2>"$OUT/write.err"
  RC=$?
  [[ $RC == 0 ]]
  status=$?
  check_status "write 2a39 01 (control point, with response)" "exit $RC: $(show write.err)"
  end_phase hr
  echo "# heart rate took $((SECONDS - start)) s"

  # --- indications ----------------------------------------------------------------------------
  start_phase thermo "$BLEKIT" notify "$B_ADDRESS" 2a1c --count 2 --timeout 60
  wait "$PID"
  RC=$?
  seen_or_state
  [[ $RC == 0 && $(wc -l <"$OUT/thermo.out") == 2 ]] && grep -qE '^00[0-9a-f]{6}ff$' "$OUT/thermo.out"
  status=$?
  check_status "notify on an indicate characteristic (2a1c): 2 temperature measurements ($(show thermo.out))" \
    "exit $RC: $(show thermo.out) $(show thermo.err)"
  "$BLEKIT" explore "$B_ADDRESS" --json --timeout 60 >"$OUT/thermo-explore.out" 2>"$OUT/thermo-explore.err"
  RC=$?
  [[ $RC == 0 ]] && json_check thermo-explore.out \
    '"indicate" in char("1809","2a1c")["flags"] and char("1809","2a1d")["value"] == "02"'
  status=$?
  check_status "explore health-thermometer: 2a1c indicate, 2a1d = 02 (body)" \
    "exit $RC: $(show thermo-explore.err) $(show thermo-explore.out 500)"
  end_phase thermo

  # --- Nordic UART ------------------------------------------------------------------------------
  start_phase uart "$BLEKIT" notify "$B_ADDRESS" 6e400003-b5a3-f393-e0a9-e50e24dcca9e \
    --count 2 --text --timeout 60
  wait "$PID"
  RC=$?
  seen_or_state
  [[ $RC == 0 ]] && grep -qE '^uart line [0-9]+$' "$OUT/uart.out" && [[ $(wc -l <"$OUT/uart.out") == 2 ]]
  status=$?
  check_status "nordic-uart: lines of B's standard input arrive as notifications ($(show uart.out))" \
    "exit $RC: $(show uart.out) $(show uart.err)"
  "$BLEKIT" write "$B_ADDRESS" 6e400002-b5a3-f393-e0a9-e50e24dcca9e --text "hello from A" \
    >"$OUT/uart-write.out" 2>"$OUT/uart-write.err"
  RC=$?
  [[ $RC == 0 ]]
  status=$?
  check_status "nordic-uart: write to RX" "exit $RC: $(show uart-write.err)"
  # Standard input as write commands through AcquireWrite's socket.
  printf 'stream line 1\nstream line 2\n' |
    "$BLEKIT" write "$B_ADDRESS" 6e400002-b5a3-f393-e0a9-e50e24dcca9e --stdin --without-response \
      >"$OUT/uart-stream.out" 2>"$OUT/uart-stream.err"
  RC=$?
  [[ $RC == 0 ]] && [[ ! -s "$OUT/uart-stream.out" ]]
  status=$?
  check_status "nordic-uart: write --stdin --without-response (AcquireWrite)" \
    "exit $RC: $(show uart-stream.err)"
  sleep 1
  end_phase uart

  # --- the other bundled profiles ---------------------------------------------------------------
  local profile condition
  for profile in battery device-information environmental-sensing; do
    case $profile in
      battery) condition='char("180f","2a19")["value"] == "57" and desc("180f","2a19","2904")["value"] == "0400ad27010000" and "notify" in char("180f","2a19")["flags"]' ;;
      device-information) condition='bytes.fromhex(char("180a","2a29")["value"]) == b"blekit" and bytes.fromhex(char("180a","2a28")["value"]) == b"blekit 0.1.0" and char("180a","2a25")["value"]' ;;
      environmental-sensing) condition='char("181a","2a6e")["value"] == "6608" and char("181a","2a6f")["value"] == "a811" and desc("181a","2a6e","2904")["value"] == "0efe2f27010000"' ;;
    esac
    start_phase "$profile" "$BLEKIT" explore "$B_ADDRESS" --json --timeout 60
    wait "$PID"
    RC=$?
    seen_or_state
    [[ $RC == 0 ]] && json_check "$profile.out" "$condition"
    status=$?
    check_status "explore $profile: its characteristics with their values and descriptors" \
      "exit $RC: $(show "$profile.err") $(show "$profile.out" 600)"
    if [[ $profile == environmental-sensing ]]; then
      # A writable descriptor (ES Trigger Setting, 0x290D): written, then read back.
      "$BLEKIT" write "$B_ADDRESS" 2a6e --descriptor 290d 013c0000 >"$OUT/desc-write.out" \
        2>"$OUT/desc-write.err"
      RC=$?
      status=$RC
      check_status "write 2a6e --descriptor 290d 013c0000 (a descriptor write request)" \
        "exit $RC: $(show desc-write.err)"
      "$BLEKIT" read "$B_ADDRESS" 2a6e --descriptor 290d >"$OUT/desc-read.out" \
        2>"$OUT/desc-read.err"
      RC=$?
      [[ $RC == 0 && $(cat "$OUT/desc-read.out") == 013c0000 ]]
      status=$?
      check_status "read 2a6e --descriptor 290d: the value written (exit $RC: $(show desc-read.out))" \
        "$(show desc-read.err)"
    fi
    end_phase "$profile"
  done

  # --- commands that do not behave: a read of the hanging one fails after serve's 10 s (well
  # before ATT's 30 s), the endless writer's read brings its first 512 bytes --------------------
  local began=$SECONDS
  start_phase unruly "$BLEKIT" read "$B_ADDRESS" ffe1 --timeout 60
  wait "$PID"
  RC=$?
  seen_or_state
  local took=$((SECONDS - began))
  ((RC != 0 && took < 25))
  status=$?
  check_status "read ffe1 (a command that hangs): refused with an ATT error (exit $RC) after $took s" \
    "$(show unruly.out) $(show unruly.err)"
  began=$SECONDS
  "$BLEKIT" read "$B_ADDRESS" ffe2 --raw --timeout 60 >"$OUT/unruly-yes.out" 2>"$OUT/unruly-yes.err"
  RC=$?
  # (Five bytes: $(...) drops a trailing newline.)
  ((RC == 0)) && [[ $(head -c 5 "$OUT/unruly-yes.out") == $'y\ny\ny' ]] \
    && (($(wc -c <"$OUT/unruly-yes.out") >= 500 && $(wc -c <"$OUT/unruly-yes.out") <= 512))
  status=$?
  check_status "read ffe2 (a command that writes forever): $(wc -c <"$OUT/unruly-yes.out") bytes in $((SECONDS - began)) s" \
    "exit $RC: $(show unruly-yes.err)"
  # A read left hanging while B stops: blekit's exit must take the command with it.
  "$BLEKIT" read "$B_ADDRESS" ffe1 --timeout 60 >/dev/null 2>&1 &
  local reader=$!
  sleep 3
  end_phase unruly
  wait "$reader"
  echo "# host A's phases took $((SECONDS - start)) s"
  finish_suite
}

case ${LAB_HOST:-} in
  a) host_a ;;
  b) host_b ;;
  *)
    echo "run me with scripts/lab two-host (LAB_HOST must be a or b)" >&2
    exit 2
    ;;
esac
