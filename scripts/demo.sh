#!/usr/bin/env bash
# The main job on a machine without a GPU: serve the locally built smoke model with vLLM's CPU server and
# run the quickstart agent loop against it. On a GPU machine, see README.md ("With a real model").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python examples/quickstart.py --smoke "$@"
