#!/usr/bin/env bash
# Set up, then check the code: ruff (lint and format), mypy, and the import layers
# (import-linter contracts in pyproject.toml). CI runs it before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check src tests bench eval
.venv/bin/ruff format --check src tests bench eval
.venv/bin/mypy
.venv/bin/lint-imports
