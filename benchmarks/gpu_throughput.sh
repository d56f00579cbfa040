#!/usr/bin/env bash
# The vector-env throughput benchmark on a GPU machine: serve a model with vLLM (GPU build) on loopback and
# run benchmarks/bench_vector_throughput.py against it. About 5-10 minutes.
#
#   MODEL=/path/to/model bash benchmarks/gpu_throughput.sh      # any local model folder vLLM loads
#   bash benchmarks/gpu_throughput.sh                           # builds the smoke model first (needs torch)
#
# Without a GPU it says so and exits 0, running nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "No NVIDIA GPU on this machine: benchmarks/gpu_throughput.sh runs nothing. Use bench_vector_throughput.py on a CPU."
  exit 0
fi
nvidia-smi -L
"$PY" -c "import vllm" 2>/dev/null || { echo "vLLM (GPU build) is not installed: pip install vllm"; exit 1; }

MODEL=${MODEL:-}
if [ -z "$MODEL" ]; then
  MODEL=$("$PY" -c "from dreamgym_env.serving import build_tiny_model, default_smoke_model_dir; print(build_tiny_model(default_smoke_model_dir()))")
fi
PORT=${PORT:-8765}
LOG=$(mktemp)
"$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name bench --host 127.0.0.1 \
  --port "$PORT" --max-model-len 4096 --generation-config vllm --enable-prompt-tokens-details >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  kill -0 $SERVER 2>/dev/null || { tail -50 "$LOG"; exit 1; }
  sleep 1
done
"$PY" benchmarks/bench_vector_throughput.py --base-url "http://127.0.0.1:$PORT/v1" --model bench \
  --sizes 1 8 32 128 256 --steps 6 --async-max 32
