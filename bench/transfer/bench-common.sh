# Sourced by scripts/bench-transfer and scripts/bench-discovery (from the checkout's root).
# bench_prepare: sets BLEKIT (an absolute path inside the checkout, which the lab VM sees) and
# PYLIB (bleak and its dependencies, installed from PyPI on first use). The VM shares the
# host's root, so the python that installs bleak (/usr/bin/python3) is the one that runs it.

BENCH_DIR=$PWD/.build-bench
PYTHON=/usr/bin/python3

bench_prepare() {
  mkdir -p "$BENCH_DIR"
  if [[ -z ${BLEKIT:-} ]]; then
    BLEKIT=$BENCH_DIR/blekit
    if [[ ! -x $BLEKIT ]]; then
      local scratch=${BENCH_SCRATCH:-/tmp/build-bench}
      echo "bench: building blekit (release) in $scratch..." >&2
      swift build -c release --scratch-path "$scratch" --product blekit >&2
      cp "$scratch/release/blekit" "$BLEKIT"
    fi
  fi
  BLEKIT=$(realpath "$BLEKIT")
  case $BLEKIT in
    "$PWD"/* | /usr/* | /opt/*) ;;
    *) echo "bench: $BLEKIT is outside the checkout; the lab VM cannot see /tmp" >&2; exit 2 ;;
  esac
  PYLIB=$BENCH_DIR/pylib
  if ! PYTHONPATH=$PYLIB $PYTHON -c 'import bleak' 2>/dev/null; then
    echo "bench: installing bleak from PyPI into $PYLIB..." >&2
    if ! $PYTHON -m pip --version >/dev/null 2>&1; then
      echo "bench: $PYTHON has no pip (Debian: apt-get install python3-pip)" >&2
      exit 2
    fi
    $PYTHON -m pip install --quiet --target "$PYLIB" bleak >&2
  fi
  echo "bench: blekit $BLEKIT; bleak $(PYTHONPATH=$PYLIB $PYTHON -c \
    'import importlib.metadata as m; print(m.version("bleak"))') from $PYLIB" >&2
}
