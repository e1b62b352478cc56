#!/bin/sh
# Runs inside the lab (scripts/bench-ceiling): hci1 advertises, connectable, through the
# kernel's management interface (btmgmt), then for each chunk size l2cap_ceiling sends BYTES
# from hci0 to a listener on hci1 over a fresh LE credit-based channel. One JSON line per
# side and run on stdout, prefixed with the chunk size. With BLEKIT set (a blekit binary the
# guest sees), GATT_TRIALS (default 3) transfers of the same size follow in the same boot:
# `blekit advertise -a hci1 --file MSG --once` to `blekit receive -a hci0 --json`, the
# central's scan started first (the emulator reports an advertiser reliably only to a scan
# already running), one `receive --json` line each.
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

[ -n "${BLEKIT:-}" ] || exit 0
btmgmt --index 1 advertising off >/dev/null
head -c "$bytes" /dev/urandom | base64 -w 0 | head -c "$bytes" >/tmp/message
trial=1
while [ "$trial" -le "${GATT_TRIALS:-3}" ]; do
  "$BLEKIT" receive -a hci0 --timeout 60 --json >"/tmp/gatt-$trial" 2>"/tmp/gatt-$trial.err" &
  central=$!
  for _ in $(seq 50); do
    bluetoothctl show hci0 2>/dev/null | grep -q "Discovering: yes" && break
    sleep 0.2
  done
  timeout 180 "$BLEKIT" advertise -a hci1 --file /tmp/message --once --timeout 170 \
    >/dev/null 2>"/tmp/adv-$trial.err" &
  advertiser=$!
  wait "$central"
  echo "gatt $trial receive $(sed 's/"message":"[^"]*",//' "/tmp/gatt-$trial") $(tail -c 300 "/tmp/gatt-$trial.err")"
  wait "$advertiser"
  trial=$((trial + 1))
  sleep 2
done
