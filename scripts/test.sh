#!/usr/bin/env bash
# Install everything the tests need, then run every tier: unit, integration (real vLLM server) and real-env.
# DREAMGYM_SKIP_INSTALL=1 skips the install (CI installs once, before linting).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${DREAMGYM_SKIP_INSTALL:-0}" != 1 ]; then
  bash scripts/install.sh
  if [ -f scripts/install_real.sh ]; then
    bash scripts/install_real.sh .venv/bin/python
  fi
fi
# Nothing may skip for want of a dependency (vLLM, PostgreSQL, a real env package): a skip fails.
export DREAMGYM_NO_SKIPS=1
exec .venv/bin/python -m pytest "$@"
