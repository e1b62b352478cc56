# Shell helpers shared by the lab suites; source it: `source Tests/Lab/common.sh`.

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
