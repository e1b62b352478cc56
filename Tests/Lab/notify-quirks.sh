#!/usr/bin/env bash
# Notifications as real peripherals send them, against every blekit command that subscribes.
#
#   scripts/lab run --controllers 0 --bumble 2 --env BLEKIT=$PWD/.build/debug/blekit \
#     -- Tests/Lab/notify-quirks.sh                      (Tests/Lab/run-all quirks)
#
# The peer is `Tests/Lab/bumble-peer.py quirks` on Bumble's air (docs/lab.md): one
# characteristic per kind (notify only, indicate only, notify and indicate flags with
# indications sent) and quirk:
#   early        its first value goes out before the Write Response to the CCCD write that
#                subscribed (bluetoothd drops such a value on the AcquireNotify path);
#   empty        a zero-length value between two others (on AcquireNotify's socket an empty
#                datagram reads as 0 bytes, like the end of the stream);
#   early-empty  both: an empty value before the Write Response.
# Checked: `blekit notify` (hex, --text, --raw) on each, `blekit explore --listen` (text and
# --json) on all at once, and `blekit receive` (AcquireNotify) from a transfer characteristic
# that sends an empty value mid-message. Then a second peer, `bumble-peer.py secure`, with a
# value that needs encryption between readable ones, and a pairing button (it accepts a
# pairing only in pairing mode): `blekit explore` unpaired (bluetoothd tries to pair on the
# refused read, the device refuses, the kernel drops the link) must connect again, finish the
# dump, mark the value and exit 5; after `blekit pair` (in pairing mode) it reads the value. Each value must arrive, in order; an empty one is an
# empty line (hex, text), nothing (--raw), "(empty)" in explore's text and "" in its JSON.
# Prints "ok" or "FAIL" per check, then "N passed, M failed"; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source Tests/Lab/common.sh
BLEKIT=${BLEKIT:-$PWD/.build/debug/blekit}
OUT=${LAB_RESULTS:-/tmp}/notify-quirks
mkdir -p "$OUT"
export PYTHONPATH=${LAB_PYLIB:-$PWD/.build-lab/pylib}
PEER=(/usr/bin/python3 Tests/Lab/bumble-peer.py)
ADDRESS=C0:FF:EE:00:20:01


uuid() { echo "6e7a01$1$2-5d3b-4c1e-9a0b-1a2b3c4d5e6f"; } # uuid KIND QUIRK
KIND_NAMES=([1]="notify" [2]="indicate" [3]="notify+indicate flags, indications sent")
# What each quirk sends, as `blekit notify` prints it in hex (one line per value).
HEX_VALUES=([1]=$'6561726c79\n7468656e' [2]=$'61\n\n62' [3]=$'\n6166746572')
COUNTS=([1]=2 [2]=3 [3]=2)
QUIRK_NAMES=([1]="an early value (before the Write Response)" [2]="an empty value between two"
  [3]="an early empty value")

"${PEER[@]}" quirks --address "$ADDRESS" >"$OUT/peer.log" 2>&1 &
PEER_PID=$!
trap 'kill $PEER_PID 2>/dev/null; wait $PEER_PID 2>/dev/null' EXIT
check "the Bumble quirks peripheral starts" wait_for 60 grep -q '^ready' "$OUT/peer.log"

# notify_run NAME ARGS...: `blekit notify -a hci0 ARGS` with a time limit (a lost value would
# otherwise wait for ever; --duration makes a short count exit 6); stdout in $OUT/NAME.out,
# stderr in $OUT/NAME.err, the status in RC.
notify_run() {
  local name=$1
  shift
  timeout 90 "$BLEKIT" notify -a hci0 --duration 20 "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  RC=$?
}

# --- blekit notify on every characteristic ----------------------------------------------
for kind in 1 2 3; do
  for quirk in 1 2 3; do
    name=notify-$kind$quirk
    notify_run "$name" --count "${COUNTS[$quirk]}" "$ADDRESS" "$(uuid $kind $quirk)"
    check "notify, ${KIND_NAMES[$kind]}, ${QUIRK_NAMES[$quirk]}: every value in order, exit 0 (exit $RC, got: $(tr '\n' '|' <"$OUT/$name.out"))" \
      bash -c "(($RC == 0)) && [[ \$(cat '$OUT/$name.out'; echo .) == '${HEX_VALUES[$quirk]}'$'\n'. ]]"
  done
done

# The other formats, on the notify-only characteristics (the path that lost values).
notify_run text-12 --text --count 3 "$ADDRESS" "$(uuid 1 2)"
check "notify --text, an empty value between two: a, an empty line, b (exit $RC)" \
  bash -c "(($RC == 0)) && [[ \$(cat '$OUT/text-12.out'; echo .) == \$'a\n\nb\n.' ]]"
notify_run raw-12 --raw --count 3 "$ADDRESS" "$(uuid 1 2)"
check "notify --raw, an empty value between two: exactly ab, nothing for the empty one (exit $RC)" \
  bash -c "(($RC == 0)) && [[ \$(od -An -c '$OUT/raw-12.out' | tr -d ' \n') == ab ]]"
notify_run raw-13 --raw --count 2 "$ADDRESS" "$(uuid 1 3)"
check "notify --raw, an early empty value: exactly after (exit $RC)" \
  bash -c "(($RC == 0)) && [[ \$(cat '$OUT/raw-13.out') == after ]]"

# --- blekit explore --listen on all of them at once ---------------------------------------
# explore_values FILE json|text: per quirk characteristic, the values heard in order (hex,
# "-" for an empty one), one line "UUID v1 v2 ..." each, sorted.
explore_values() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import collections, json, re, sys
path, form = sys.argv[1], sys.argv[2]
heard = collections.defaultdict(list)
for line in open(path, encoding="utf-8", errors="replace"):
    if form == "json":
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("type") == "notification":
            heard[item["characteristic"].lower()].append(item["value"].replace(" ", "") or "-")
    else:
        match = re.match(r"notify  \+[0-9.]+s  (6e7a01\S+)  (\(empty\)|[0-9a-f ]+?)(  |$)", line.rstrip("\n"))
        if match:
            value = match.group(2)
            heard[match.group(1)].append("-" if value == "(empty)" else value.replace(" ", ""))
for uuid in sorted(heard):
    if uuid.startswith("6e7a01"):
        print(uuid, *heard[uuid])
PY
}
expected_explore() {
  local kind quirk
  local -A words=([1]="6561726c79 7468656e" [2]="61 - 62" [3]="- 6166746572")
  for kind in 1 2 3; do
    for quirk in 1 2 3; do echo "$(uuid $kind $quirk) ${words[$quirk]}"; done
  done | sort
}
expected_explore >"$OUT/explore.expected"
timeout 120 "$BLEKIT" explore -a hci0 --listen 12 "$ADDRESS" >"$OUT/explore.txt" 2>"$OUT/explore.err"
rc=$?
explore_values "$OUT/explore.txt" text >"$OUT/explore.heard"
check "explore --listen: on all 9 characteristics every value in order, empty ones as (empty), exit 0 (exit $rc; diff: $(diff "$OUT/explore.expected" "$OUT/explore.heard" | grep -c '^[<>]') lines)" \
  bash -c "(($rc == 0)) && cmp -s '$OUT/explore.expected' '$OUT/explore.heard'"
timeout 120 "$BLEKIT" explore -a hci0 --json --listen 12 "$ADDRESS" >"$OUT/explore.json" 2>"$OUT/explore-json.err"
rc=$?
explore_values "$OUT/explore.json" json >"$OUT/explore-json.heard"
check "explore --json --listen: the same values, an empty one as \"value\": \"\", exit 0 (exit $rc; diff: $(diff "$OUT/explore.expected" "$OUT/explore-json.heard" | grep -c '^[<>]') lines)" \
  bash -c "(($rc == 0)) && cmp -s '$OUT/explore.expected' '$OUT/explore-json.heard'"

# --- blekit receive (AcquireNotify) with an empty value mid-message -----------------------
timeout 90 "$BLEKIT" receive -a hci0 --from "$ADDRESS" >"$OUT/receive.out" 2>"$OUT/receive.err"
rc=$?
check "receive (AcquireNotify's socket), an empty value mid-message: exit 0, the message exact (exit $rc)" \
  bash -c "(($rc == 0)) && [[ \$(cat '$OUT/receive.out') == 'first half|second half' ]]"

# --- explore a value that needs encryption, unpaired, then paired --------------------------
kill $PEER_PID 2>/dev/null
wait $PEER_PID 2>/dev/null
SECURE=C0:FF:EE:00:30:01
PAIRING_MODE=${LAB_SHARED:-/tmp}/secure-pairing-mode
rm -f "$PAIRING_MODE"
"${PEER[@]}" secure --address "$SECURE" --pairing-mode "$PAIRING_MODE" >"$OUT/secure-peer.log" 2>&1 &
PEER_PID=$!
check "the Bumble peripheral with a value that needs encryption starts" \
  wait_for 60 grep -q '^ready' "$OUT/secure-peer.log"
SECRET=6e7a0202-5d3b-4c1e-9a0b-1a2b3c4d5e6f
timeout 150 "$BLEKIT" explore -a hci0 --timeout 40 "$SECURE" >"$OUT/secure-unpaired.txt" 2>"$OUT/secure-unpaired.err"
rc=$?
sed 's/^/# explore unpaired: /' "$OUT/secure-unpaired.txt" "$OUT/secure-unpaired.err"
# What bluetoothd answered decides the mark: an ATT security error ("Not paired") names the
# need; a read its failed pairing cut with a bare error, which dropped the link twice, is
# marked as possibly needing pairing. Either way the dump must be complete, with exit 5.
if grep -A1 "$SECRET" "$OUT/secure-unpaired.txt" | grep -q '^    error  needs encryption'; then
  echo "# explore unpaired: bluetoothd named the need (an ATT security error)"
  MARK="    error  needs encryption: pair first (blekit pair $SECURE)"
  LAST="1 value not read: 1 needs pairing first (blekit pair $SECURE)"
else
  echo "# explore unpaired: no ATT security error from bluetoothd; expecting the dropped-link mark"
  MARK="    error  the link dropped when reading it (it may need pairing: blekit pair $SECURE)"
  LAST="1 value not read: 1 dropped the link when read (it may need pairing: blekit pair $SECURE)"
fi
check "explore unpaired: the whole dump (the open value, the battery level after the secure one), the secure value marked '${MARK#    error  }', the last line '$LAST', exit 5 (exit $rc)" \
  bash -c "(($rc == 5)) && grep -q '\"open value\"' '$OUT/secure-unpaired.txt' && grep -q '^    value  57' '$OUT/secure-unpaired.txt' \
    && grep -A1 '$SECRET' '$OUT/secure-unpaired.txt' | grep -qF '$MARK' \
    && [[ \$(tail -n 1 '$OUT/secure-unpaired.txt') == '$LAST' ]]"
timeout 150 "$BLEKIT" explore -a hci0 --json --timeout 40 "$SECURE" >"$OUT/secure-unpaired.json" 2>"$OUT/secure-unpaired-json.err"
rc=$?
# bluetoothd 5.82 retries a read refused for security with raised security itself; when that
# pairing fails and the link drops, it never answers the read and keeps it pending for good,
# so it answers every later read of that value, from any client, with InProgress (seen on
# Debian 13, docs/lab.md), or leaves the same read on the next link unanswered too (the
# run of 2026-12-07). Where the unpaired text exploration above met that (its value
# "disconnected before the read was answered"), this second exploration can only report
# bluetoothd's InProgress, or the 40 s call limit: exit 8, the rest of the dump complete.
BLUETOOTHD_VERSION=$(bluetoothd --version 2>/dev/null)
held=no
if [[ $BLUETOOTHD_VERSION != 5.[0-7]* ]] && grep -A1 "$SECRET" "$OUT/secure-unpaired.txt" | grep -q 'disconnected before the read was answered'; then
  held=yes
fi
check "explore --json unpaired: the secure value has \"needs\": \"pairing\" (or its error \"droppedLink\": true$([[ $held == yes ]] && echo ", or, bluetoothd $BLUETOOTHD_VERSION still holding the first exploration's read, its error InProgress or the call limit with exit 8")), the battery level is there, \"unread\": 1, exit 5 (exit $rc)" \
  bash -c "/usr/bin/python3 - '$OUT/secure-unpaired.json' $rc $held <<'PY'
import json, sys
tree = json.load(open(sys.argv[1]))
rc, held = int(sys.argv[2]), sys.argv[3] == 'yes'
chars = {c['uuid'].lower(): c for s in tree['services'] for c in s['characteristics']}
secret, battery = chars['$SECRET'], chars['00002a19-0000-1000-8000-00805f9b34fb']
error = secret['error'] or {}
marked = rc == 5 and (secret['needs'] == 'pairing' or error.get('droppedLink') is True)
if held and not marked:
    marked = (rc == 8 and error.get('name') in ('org.bluez.Error.InProgress', 'blekit.Timeout')
              and secret['needs'] is None)
sys.exit(0 if marked and secret['value'] is None
         and battery['value'] == '57' and tree['unread'] == 1 else 1)
PY"
touch "$PAIRING_MODE"
timeout 90 "$BLEKIT" pair -a hci0 --confirm auto "$SECURE" >"$OUT/secure-pair.out" 2>"$OUT/secure-pair.err"
rc=$?
sed 's/^/# blekit pair: /' "$OUT/secure-pair.out" "$OUT/secure-pair.err"
check "blekit pair, the device in pairing mode: exit 0 (exit $rc)" bash -c "(($rc == 0))"
rm -f "$PAIRING_MODE"
# Where the explorations above left bluetoothd holding their read for good (held=yes, 5.82),
# the Debian 13 runs saw it answer the paired read not at all (40 s), or crash (a general
# protection fault) as the paired link closed. Only a new bluetoothd forgets the read;
# the bond is on disk, so it is started again before the paired exploration.
if [[ $held == yes ]]; then
  crashed=$(dmesg | grep 'traps: bluetoothd' | tail -n 1 | cut -c1-120)
  echo "# bluetoothd $BLUETOOTHD_VERSION holds the unpaired read${crashed:+ and crashed: $crashed}; starting it again"
  if lab-bluetoothd status >/dev/null 2>&1; then lab-bluetoothd restart >/dev/null 2>&1; else lab-bluetoothd start >/dev/null 2>&1; fi
  lab-bluetoothd wait >/dev/null 2>&1
fi
timeout 150 "$BLEKIT" explore -a hci0 --timeout 40 "$SECURE" >"$OUT/secure-paired.txt" 2>"$OUT/secure-paired.err"
rc=$?
sed 's/^/# explore paired: /' "$OUT/secure-paired.txt" "$OUT/secure-paired.err"
check "explore paired: the secure value read (\"secret value\"), nothing marked, exit 0 (exit $rc)" \
  bash -c "(($rc == 0)) && grep -A1 '$SECRET' '$OUT/secure-paired.txt' | grep -q '\"secret value\"' && ! grep -q 'not read' '$OUT/secure-paired.txt'"
sed 's/^/# secure peer: /' "$OUT/secure-peer.log" | grep -v 'WARNING' | head -40

# The peer sends an early indication later instead when one of its indications is still
# unconfirmed (ATT allows one at a time); such a case did not test the quirk.
deferred=$(grep -c '^deferred' "$OUT/peer.log")
((deferred == 0)) || echo "# $deferred early indication(s) were deferred by the peer (see $OUT/peer.log)"
finish_suite
