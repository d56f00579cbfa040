#!/usr/bin/env bash
# Install the real environments' engines for the tests marked `real` (CI calls this once).
# Usage: scripts/install_real.sh [PYTHON]   (default: the active python)
set -euo pipefail
PY="${1:-python}"
BIN_DIR="$(dirname "$(command -v "$PY")")"

# Debian's Chromium for BrowserGym (its pinned Playwright's own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update
  apt-get install -y --no-install-recommends chromium
fi

# alfworld builds its planner (fast-downward) from source, about 3 minutes on 2 cores. The build calls
# `python`, which must be the target interpreter, so its folder goes first on PATH.
PATH="$BIN_DIR:$PATH" "$PY" -m pip install "textworld>=1.6" "alfworld>=0.4" "browsergym-core>=0.13" \
  "miniwob>=1.1" "browsergym-miniwob>=0.14"
