#!/usr/bin/env bash
# The main job on a machine without a GPU: serve the shipped TextWorld experience model with vLLM's CPU
# server, play a held-out game in the real engine and in the simulator side by side, train a policy in
# the simulator only and play it in the real games (examples/textworld_demo.py). On a GPU machine, see
# README.md ("With a real model").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if ! .venv/bin/python -c "import textworld" >/dev/null 2>&1; then
  echo "Installing TextWorld (the real games)..."
  .venv/bin/python -m pip --disable-pip-version-check -q install "textworld>=1.6"
fi
exec .venv/bin/python examples/textworld_demo.py "$@"
