#!/usr/bin/env bash
# Lint, format check and type check, with the tools scripts/install.sh puts in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m mypy dreamgym_env
