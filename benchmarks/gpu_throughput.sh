#!/usr/bin/env bash
# The vector-env throughput benchmark on a GPU machine, with a randomly initialised ~1.3B Qwen2 model
# built locally (no download): see benchmarks/gpu_throughput.py. About 5-10 minutes.
#
#   bash benchmarks/gpu_throughput.sh [--sizes 8 32 128 256] [--model-dir DIR]
#
# Without a GPU it builds the tokenizer and config, says it stops there, and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" benchmarks/gpu_throughput.py "$@"
