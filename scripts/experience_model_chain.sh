#!/usr/bin/env bash
# The experience-model chain on a CPU, end to end: collect real TextWorld transitions -> SFT data
# (split by game) -> train a small model from scratch with `dreamgym train` -> serve it with vLLM's
# OpenAI server -> `dreamgym eval-fidelity` on held-out games, against the same model untrained and
# two model-free baselines. Writes everything under $OUT (default runs/experience_model); the result
# table is $OUT/results/fidelity.md and the plot $OUT/results/fidelity.png.
#
# Usage: scripts/experience_model_chain.sh            (about 20-25 minutes on 2 cores)
# Knobs (environment): OUT GAMES EPISODES TRAIN_SECONDS EVAL_LIMIT HISTORY_WINDOW TOP_K PYTHON
# The model: Llama, 4 layers, hidden 192 (6 heads of 32, 2 key/value heads), about 2M parameters.
set -euo pipefail

OUT=${OUT:-runs/experience_model}
GAMES=${GAMES:-32}
EPISODES=${EPISODES:-3}
TRAIN_SECONDS=${TRAIN_SECONDS:-660}
EVAL_LIMIT=${EVAL_LIMIT:-150}
HISTORY_WINDOW=${HISTORY_WINDOW:-2}
TOP_K=${TOP_K:-1}
PYTHON=${PYTHON:-${VIRTUAL_ENV:-.venv}/bin/python}
DREAMGYM=("$PYTHON" -m dreamgym_env.cli)
ARCH=(--hidden-size 192 --heads 6 --kv-heads 2 --layers 4 --intermediate-size 512 --vocab-size 2048)
export DREAMGYM_NO_PROGRESS=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }

mkdir -p "$OUT"
stamp "1/5 collecting real transitions from $GAMES generated games"
"$PYTHON" scripts/collect_textworld.py --games "$GAMES" --episodes "$EPISODES" --out "$OUT/buffer.sqlite"

stamp "2/5 building SFT data (history_window=$HISTORY_WINDOW, top_k=$TOP_K, split by game)"
"${DREAMGYM[@]}" build-sft --buffer "$OUT/buffer.sqlite" --out "$OUT/sft" \
    --history-window "$HISTORY_WINDOW" --top-k "$TOP_K" --eval-fraction 0.2

stamp "3/5 training from scratch for at most ${TRAIN_SECONDS}s"
"${DREAMGYM[@]}" train --data "$OUT/sft" --out "$OUT/model" --from-scratch --cpu --no-eval \
    --max-seconds "$TRAIN_SECONDS" --epochs 20 --max-length 1280 "${ARCH[@]}"
"${DREAMGYM[@]}" train --data "$OUT/sft" --out "$OUT/model-untrained" --from-scratch --untrained "${ARCH[@]}"

stamp "4/5 baselines"
rm -rf "$OUT/results"
"${DREAMGYM[@]}" eval-fidelity --buffer "$OUT/buffer.sqlite" --data "$OUT/sft" --out "$OUT/results" \
    --limit "$EVAL_LIMIT" --baseline repeat-state --baseline nearest-transition

stamp "5/5 serving each model with vLLM (one server at a time) and evaluating it"
for name in model model-untrained; do
    "$PYTHON" - "$OUT" "$name" "$EVAL_LIMIT" <<'PY'
import sys

from dreamgym_env.cli import main
from dreamgym_env.serving import SMOKE_SERVER_ARGS, VLLMServer

out, name, limit = sys.argv[1:4]
with VLLMServer(f"{out}/{name}", served_model_name=name, max_model_len=2048, extra_args=SMOKE_SERVER_ARGS,
                log_path=f"{out}/vllm-{name}.log") as server:
    print(f"serving {name} at {server.base_url} (started in {server.startup_seconds:.0f}s)", flush=True)
    code = main(["eval-fidelity", "--buffer", f"{out}/buffer.sqlite", "--data", f"{out}/sft",
                 "--out", f"{out}/results", "--limit", limit, "--base-url", server.base_url,
                 "--model", name, "--max-tokens", "384"])
sys.exit(code)
PY
done

stamp "done"
cat "$OUT/results/fidelity.md"
