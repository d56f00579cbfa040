"""Rebuild the shipped coin-collector policy: the sim-to-real benchmark's sim-only arm, then package it.

The policy the demo plays (``dreamgym_env/models/coin_collector_policy``) is MaskablePPO trained in
the simulator only, on the benchmark's suite (``tw-coin_collector`` level 3, 64 training games), with
the shipped TextWorld experience model served by vLLM. This script

1. builds the suite and the offline data (3 noisy-expert episodes per training game) under ``--run``,
2. serves the shipped experience model and runs ``benchmarks/bench_sim_to_real.py --arms sim-only``
   for ``--seed`` (which also plays the policy in the real games: 100 episodes per split),
3. copies the policy into ``--dest`` with a manifest: data, settings, measured success, how its
   simulated steps were answered, checksum, licence.

    python scripts/build_coin_collector_policy.py                  # about 10 minutes on 2 CPU cores
    python scripts/build_coin_collector_policy.py --package-only   # only step 3, from an existing run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "dreamgym_env" / "models" / "coin_collector_policy"
RECIPE = ("tw-coin_collector", {"level": 3})
TRAIN_GAMES, HELDOUT_GAMES, EXPERT_EPISODES = 64, 32, 3
BENCH = [
    "--train-games", str(TRAIN_GAMES), "--heldout-games", str(HELDOUT_GAMES),
    "--total-timesteps", "10000", "--eval-episodes", "100", "--max-steps", "12", "--max-actions", "16",
    "--num-envs", "8", "--n-steps", "32", "--model", "textworld",
    "--model-dir", "dreamgym_env/models/textworld", "--arms", "sim-only",
]  # fmt: skip


def build_data(run: Path) -> None:
    """The suite and its training games' offline data (reused when already there)."""
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.real.textworld import play_noisy_expert
    from dreamgym_env.real.textworld_suite import build_suite

    suite = build_suite(run / "suite", train_games=TRAIN_GAMES, heldout_games=HELDOUT_GAMES, recipe=RECIPE)
    with ReplayBuffer.open(run / "offline.sqlite", dedup="episode") as buffer:
        if len(buffer) == 0:
            for i, game in enumerate(suite.paths("train")):
                buffer.add_many(play_noisy_expert(game, EXPERT_EPISODES, seed=i, split="train"))
        print(f"suite in {run / 'suite'}; {len(buffer)} offline transitions", flush=True)


def train(run: Path, seed: int) -> None:
    """The benchmark's sim-only arm for ``seed``, against the shipped model served here."""
    from dreamgym_env.serving.shipped import serve_shipped_model

    with serve_shipped_model("textworld", log_path=run / "vllm.log") as server:
        command = [
            sys.executable, str(ROOT / "benchmarks" / "bench_sim_to_real.py"), "--suite", str(run / "suite"),
            "--buffer", str(run / "offline.sqlite"), "--base-url", server.base_url, "--seeds", str(seed),
            "--out", str(run / "table.md"), *BENCH,
        ]  # fmt: skip
        subprocess.run(command, check=True, cwd=ROOT)


def answered(record: dict) -> dict[str, int]:
    """Who answered the arm's simulated steps: the offline data, an earlier answer, the model, the rules."""
    memo = record["memo"]
    by = {"offline_real_transition": memo["real_hits"], "earlier_answer": memo["hits"] + memo["shared"]}
    by["model_request"] = memo["model_answers"]
    by["domain_rules_or_unparsable"] = record["sim_steps"] - sum(by.values())
    return by


def package(run: Path, seed: int, dest: Path) -> dict:
    """Copy the run's policy into ``dest`` and write its manifest; returns the manifest."""
    arm = json.loads((run / "arms" / "sim-only.json").read_text(encoding="utf-8"))
    record = arm["seeds"][str(seed)]
    source = run / "policies" / f"sim-only-seed{seed}.zip"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest / "policy.zip")
    config = {k: v for k, v in arm["config"].items() if k not in ("suite", "base_url", "buffer")}
    manifest = {
        "name": "coin_collector_policy",
        "what": "MaskablePPO (sb3-contrib) over TextEmbedding(DiscreteActions(env, 16), fields=('observation', "
        "'task')), trained in DreamGym/TextWorld-v0 only: 0 real steps",
        "rebuild": "python scripts/build_coin_collector_policy.py",
        "data": {
            "suite": {
                "recipe": list(RECIPE),
                "seed": 0,
                "train_games": TRAIN_GAMES,
                "heldout_games": HELDOUT_GAMES,
            },
            "offline_transitions": record["offline_transitions"],
            "offline_episodes_per_game": EXPERT_EPISODES,
            "offline_policy": "expert, then noisy expert (epsilon 0.4)",
        },
        "training": {
            "seed": seed,
            "simulated_steps": record["sim_steps"],
            "real_steps": record["real_steps"],
            "ppo_updates": record["updates"],
            "seconds": record["sim_train_seconds"],
            "simulated_steps_answered": answered(record),
            "settings": config,
        },
        "evaluation": {
            "in": "DreamGym/TextWorld-Real-v0",
            "episodes_per_split": arm["config"]["eval_episodes"],
            "episode_seeds_from": record["eval_seed"],
            "success_heldout_games": record["success_heldout"],
            "success_training_games": record["success_train"],
        },
        "sha256": hashlib.sha256((dest / "policy.zip").read_bytes()).hexdigest(),
        "bytes": (dest / "policy.zip").stat().st_size,
        "versions": {p: version(p) for p in ("stable-baselines3", "sb3-contrib", "torch")},
        "licence": "Apache-2.0 (the project's)",
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main() -> None:
    """Build, train and package, or only package (``--package-only``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", default="runs/coin_collector_policy", help="work folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dest", default=str(DEST))
    parser.add_argument("--package-only", action="store_true")
    args = parser.parse_args()
    run = Path(args.run).resolve()
    if not args.package_only:
        build_data(run)
        train(run, args.seed)
    manifest = package(run, args.seed, Path(args.dest))
    print(json.dumps(manifest["evaluation"], indent=1))


if __name__ == "__main__":
    main()
