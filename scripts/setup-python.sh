#!/usr/bin/env bash
# Create (or reuse) the Python venv for the kafka-python oracle in tests/oracle/.
#
#   scripts/setup-python.sh            -> venv at <repo>/.venv
#   KLOG_VENV=/tmp/v scripts/setup-python.sh
#
# Installs the pinned packages of tests/oracle/requirements.txt. Idempotent: when the venv's stamp
# matches requirements.txt (and the interpreter), it only checks that the modules import and exits.
# The venv's python path is the only thing printed on stdout, so callers can do
#   PY="$(scripts/setup-python.sh)"
# Everything else goes to stderr. KLOG_PYTHON picks the base interpreter (default python3).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$root/tests/oracle/requirements.txt"
venv="${KLOG_VENV:-.venv}"
case "$venv" in
  /*) ;;
  *) venv="$root/$venv" ;;
esac
base_python="${KLOG_PYTHON:-python3}"
py="$venv/bin/python"
stamp="$venv/.klog-requirements.stamp"
imports='import kafka, kafka.record, snappy, cramjam, lz4.frame, xxhash, zstandard, crc32c
assert kafka.__version__ == "3.0.12", kafka.__version__'

log() { echo "setup-python: $*" >&2; }

if ! command -v "$base_python" >/dev/null 2>&1; then
  log "no '$base_python' on PATH (set KLOG_PYTHON)"; exit 1
fi
want="$( { cat "$req"; "$base_python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

# Fast path: stamp matches and everything imports.
if [ -x "$py" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$py" -c "$imports" >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi

mkdir -p "$venv"
# Serialise concurrent runs (e.g. parallel test binaries) on a lock inside the venv folder.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$venv/.klog-setup.lock"
  flock 9
  # Someone else may have finished while we waited.
  if [ -x "$py" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
     && "$py" -c "$imports" >/dev/null 2>&1; then
    echo "$py"
    exit 0
  fi
fi

# A venv whose interpreter no longer runs (base python changed) is rebuilt from scratch.
if [ -e "$venv/pyvenv.cfg" ] && ! "$py" -c 'pass' >/dev/null 2>&1; then
  log "venv at $venv is broken; recreating"
  find "$venv" -mindepth 1 -maxdepth 1 ! -name .klog-setup.lock -exec rm -rf {} +
fi

if [ ! -x "$py" ]; then
  log "creating venv at $venv with $("$base_python" --version 2>&1)"
  if ! "$base_python" -m venv "$venv" >&2; then
    log "'$base_python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"; exit 1
  fi
fi

rm -f "$stamp"
log "installing $req"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
  "$py" -m pip install --quiet --requirement "$req" >&2
"$py" -c "$imports" >&2
echo "$want" > "$stamp"
log "ready"
echo "$py"
