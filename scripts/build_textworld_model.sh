#!/usr/bin/env bash
# Rebuild the shipped TextWorld experience model (dreamgym_env/models/textworld) from nothing:
#   1. the game suite (1,000 training + 40 held-out games, fixed seeds) and real transitions of every
#      game (an expert episode and 2 noisy-expert ones each, scripts/collect_textworld.py), observed in
#      the canonical facts state, each task carrying its layout and winning conditions as hidden facts;
#   2. SFT data: held-out games apart, one episode of each training game held out, each prompt with the
#      state (Markov: room, exits, things and inventory, so no history step) and the most similar
#      transition of another episode (`dreamgym build-sft`);
#   3. a Llama-architecture model trained from scratch for a fixed number of optimizer steps and a fixed
#      seed (`dreamgym train`), so the run does not depend on the machine's speed. Training checkpoints
#      every SAVE_STEPS steps and resumes from the newest checkpoint: set SITTING_SECONDS to stop a
#      sitting after that long and rerun the script to continue (the learning-rate schedule spans all);
#   4. the model copied into the package with manifest.json (data, seeds, checksum), then scored with
#      `dreamgym eval-fidelity` on both held-out splits (served by vLLM) and the metrics added.
#
# Usage: scripts/build_textworld_model.sh    (see docs/experience_model.md for the time; OUT=runs/textworld_model)
# Knobs (environment): OUT STEPS BATCH TRAIN_GAMES HELDOUT_GAMES EPISODES SAVE_STEPS SITTING_SECONDS SKIP_EVAL PYTHON
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-runs/textworld_model}
STEPS=${STEPS:-2400}
BATCH=${BATCH:-16}
TRAIN_GAMES=${TRAIN_GAMES:-1000}
HELDOUT_GAMES=${HELDOUT_GAMES:-40}
EPISODES=${EPISODES:-3}
SAVE_STEPS=${SAVE_STEPS:-100}
SITTING=()
if [ -n "${SITTING_SECONDS:-}" ]; then SITTING=(--max-seconds "$SITTING_SECONDS"); fi
HISTORY_WINDOW=0
TOP_K=1
SEED=0
PYTHON=${PYTHON:-.venv/bin/python}
DEST=dreamgym_env/models/textworld
DREAMGYM=("$PYTHON" -m dreamgym_env.cli)
ARCH=(--hidden-size 256 --heads 8 --kv-heads 4 --layers 4 --intermediate-size 688 --vocab-size 4096)
export DREAMGYM_NO_PROGRESS=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
mkdir -p "$OUT"

if [ ! -f "$OUT/buffer.sqlite" ]; then
    stamp "1/4 suite and real transitions"
    "$PYTHON" scripts/collect_textworld.py --suite "$OUT/suite" --train-games "$TRAIN_GAMES" \
        --heldout-games "$HELDOUT_GAMES" --episodes "$EPISODES" --epsilon 0.4 --seed "$SEED" \
        --out "$OUT/buffer.sqlite"
fi

stamp "2/4 SFT data"
[ -f "$OUT/sft/manifest.json" ] || "${DREAMGYM[@]}" build-sft --buffer "$OUT/buffer.sqlite" --out "$OUT/sft" --history-window "$HISTORY_WINDOW" \
    --top-k "$TOP_K" --heldout-tasks "$OUT/heldout_tasks.txt" --eval-episodes-per-task 1 \
    --demonstrations other_episodes --prompt-style compact --seed "$SEED"

stamp "3/4 training for $STEPS steps"
"${DREAMGYM[@]}" train --data "$OUT/sft" --out "$OUT/model" --from-scratch --cpu --no-eval \
    --max-steps "$STEPS" --batch-size "$BATCH" --lr 2e-3 --max-length 1536 --seed "$SEED" --group-by-length \
    --threads 2 --save-steps "$SAVE_STEPS" --resume "${SITTING[@]}" "${ARCH[@]}"
if [ ! -f "$OUT/model/model.safetensors" ] || [ "$("$PYTHON" -c "import json; print(json.load(open('$OUT/model/dreamgym_training.json'))['total']['steps'])")" -lt "$STEPS" ]; then
    stamp "sitting over before step $STEPS: run the script again to resume from the last checkpoint"
    exit 0
fi

stamp "4/4 packaging into $DEST"
"$PYTHON" scripts/package_textworld_model.py --run "$OUT" --dest "$DEST"
if [ -z "${SKIP_EVAL:-}" ]; then
    "$PYTHON" scripts/package_textworld_model.py --run "$OUT" --dest "$DEST" --evaluate
fi
stamp "done"
