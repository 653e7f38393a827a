#!/usr/bin/env bash
# Regenerate constraints.txt from pyproject.toml with pip-compile (pip-tools), run from a
# throwaway venv with the tools pinned. Existing pins are kept where they still fit; extra
# arguments go to pip-compile, e.g. --upgrade or --upgrade-package fastapi.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TOOLS=$(mktemp -d)
trap 'rm -rf "$TOOLS"' EXIT
"$PYTHON" -m venv "$TOOLS"
"$TOOLS/bin/pip" install -q pip==26.3 pip-tools==7.6.2
# --all-build-deps --allow-unsafe: also pin the setuptools that builds filbert's C extensions.
"$TOOLS/bin/pip-compile" --quiet --no-header --no-emit-index-url --no-emit-find-links \
  --extra test --extra bench --extra lint --strip-extras --all-build-deps --allow-unsafe \
  --output-file constraints.txt "$@" pyproject.toml
{
  cat <<'EOF'
# The exact version of every package scripts/setup.sh installs: filbert's dependencies, its
# test, bench and lint extras, everything they pull in, and the setuptools that builds filbert.
# pip takes it as constraints (-c, and --build-constraint for the build), so it installs only
# what pyproject.toml asks for, at these versions.
# Made by pip-compile (pip-tools): it resolves with pip itself under this machine's pip
# configuration, so every pin is one that pip here can install; it reads the extras from
# pyproject.toml, notes why each package is pinned, and keeps pins on a rerun unless told
# to upgrade. Regenerate after editing dependencies in pyproject.toml with: scripts/lock.sh
# (upgrade everything: scripts/lock.sh --upgrade; one package: --upgrade-package NAME).
EOF
  cat constraints.txt
} > constraints.txt.new
mv constraints.txt.new constraints.txt
