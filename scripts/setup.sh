#!/usr/bin/env bash
# Create .venv and install filbert with its test, lint and bench dependencies (idempotent:
# the slow tests run every bench/ script, tests/test_benches.py), at the versions pinned in
# constraints.txt (scripts/lock.sh regenerates it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# filbert's C extensions (setup.py) need gcc and Python's headers: Debian's pythonX.Y-dev.
if [ ! -f "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "python$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-dev" >/dev/null
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt --build-constraint constraints.txt -e '.[render,test,lint,bench]'
