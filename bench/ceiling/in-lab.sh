#!/bin/sh
# Runs inside the lab (scripts/bench-ceiling): hci1 advertises, connectable, through the
# kernel's management interface (btmgmt), then for each chunk size l2cap_ceiling sends BYTES
# from hci0 to a listener on hci1 over a fresh LE credit-based channel. One JSON line per
# side and run on stdout, prefixed with the chunk size.
#   in-lab.sh BINARY BYTES MTU CHUNK...
set -u
binary=$1 bytes=$2 mtu=$3
shift 3
central=00:AA:01:00:00:00
peripheral=00:AA:01:01:00:01
btmgmt --index 1 connectable on >/dev/null
btmgmt --index 1 advertising on >/dev/null
psm=129
for chunk in "$@"; do
  "$binary" listen "$peripheral" "$psm" "$bytes" "$mtu" >"/tmp/listen-$chunk" 2>"/tmp/listen-$chunk.err" &
  listener=$!
  sleep 1
  sender=$(timeout 300 "$binary" send "$central" "$peripheral" "$psm" "$bytes" "$chunk" "$mtu" 2>&1)
  wait "$listener"
  echo "chunk $chunk send $sender"
  echo "chunk $chunk listen $(cat "/tmp/listen-$chunk" "/tmp/listen-$chunk.err")"
  psm=$((psm + 2))
  sleep 2  # the LE link goes down before the next channel makes a new one
done
