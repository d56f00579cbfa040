#!/usr/bin/env bash
# Install everything the tests need, then run every tier: unit, integration (real vLLM server) and real-env;
# then, for a full run (no arguments), the verl and verifiers adapter tests against the real packages,
# each in its own venv (scripts/install_integrations.sh).
# DREAMGYM_SKIP_INSTALL=1 skips the install (CI installs once, before linting).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${DREAMGYM_SKIP_INSTALL:-0}" != 1 ]; then
  bash scripts/install.sh
  if [ -f scripts/install_real.sh ]; then
    bash scripts/install_real.sh .venv/bin/python
  fi
  if [ $# -eq 0 ]; then
    bash scripts/install_integrations.sh
  fi
fi
# Nothing may skip for want of a dependency (vLLM, PostgreSQL, a real env package): a skip fails.
export DREAMGYM_NO_SKIPS=1
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
status=0
.venv/bin/python -m pytest || status=$?
# The tests marked verl / verifiers, deselected above, and the adapters' other tests on the real
# classes; DREAMGYM_REQUIRE makes a package that does not import there an error, not a deselection.
for trainer in verl verifiers; do
  echo "== tests/integrations/test_integrations_$trainer.py in .venv-$trainer (the real $trainer)"
  DREAMGYM_REQUIRE=$trainer ".venv-$trainer/bin/python" -m pytest "tests/integrations/test_integrations_$trainer.py" \
    || status=$?
done
exit "$status"
