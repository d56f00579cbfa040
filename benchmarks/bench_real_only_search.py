"""Where does the real-only arm learn? MaskablePPO on real TextWorld games, over game counts and budgets.

A sim-to-real table can only rank its arms when the policy trained on real steps clearly beats a random
one on held-out games. This trains :mod:`dreamgym_env.training.ppo`'s recipe on the real engine for
every configuration and seed given, and reports, per configuration, the success of the trained and of a
uniform random admissible policy on the training games (new episode seeds) and on held-out games, with
the ratio trained / random on held-out games (the target is at least 2 over 3 seeds).

    python benchmarks/bench_real_only_search.py --configs 3:32:20000,3:64:20000,3:64:10000,3:64:5000 \\
        --seeds 0,1,2 --out docs/results/real_only_search.json

A configuration is ``level:training games:timesteps`` of ``tw-coin_collector`` (32 held-out games, 12
steps an episode, 8 envs, 128 steps per env per rollout, 64 evaluation episodes per split). Each run
keeps its ``result.json`` under ``--runs``; a rerun with the same settings reuses it, so an interrupted
search loses at most one run.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _harness import arg_parser, mean_std, write_json

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.training.ppo import PPOSettings, train_and_evaluate

SPLITS = {"train": "train_games", "heldout": "held_out_games"}  # table key -> result.json prefix


def settings_for(
    level: int, games: int, timesteps: int, seed: int, runs: Path, games_dir: str
) -> PPOSettings:
    """One run's settings: only the level, the training games, the budget and the seed vary."""
    return PPOSettings(
        env_id="DreamGym/TextWorld-Real-v0",
        challenge="tw-coin_collector",
        level=level,
        train_games=games,
        eval_games=32,
        games_dir=games_dir,
        max_steps=12,
        num_envs=8,
        n_steps=128,
        total_timesteps=timesteps,
        eval_episodes=64,
        seed=seed,
        out_dir=str(runs / f"cc-l{level}-g{games}-b{timesteps}-s{seed}"),
    )


def run(settings: PPOSettings) -> dict[str, Any]:
    """The run's result, from its ``result.json`` when one with the same settings exists."""
    saved = Path(settings.out_dir) / "result.json"
    if saved.is_file():
        result = json.loads(saved.read_text(encoding="utf-8"))
        if result.get("args") == asdict(settings):
            return result
    return train_and_evaluate(settings)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument(
        "--configs", default="3:32:20000,3:64:20000", help="level:games:timesteps, comma-separated"
    )
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--runs", default="runs/budget_search", help="folder of the per-run results")
    parser.add_argument("--games-dir", default="runs/textworld_games", help="generated games (cached)")
    parser.add_argument("--out", help="write the table as JSON here")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    rows = []
    for config in args.configs.split(","):
        level, games, timesteps = (int(part) for part in config.split(":"))
        results = [
            run(settings_for(level, games, timesteps, seed, Path(args.runs), args.games_dir))
            for seed in seeds
        ]
        row: dict[str, Any] = {
            "challenge": "tw-coin_collector",
            "level": level,
            "train_games": games,
            "heldout_games": 32,
            "total_timesteps": timesteps,
            "seeds": seeds,
            "train_seconds": mean_std([r["train_seconds"] for r in results], count=False),
        }
        for split, prefix in SPLITS.items():
            row[split] = {
                policy: mean_std([r[f"{prefix}_{policy}"] for r in results], count=False)
                for policy in ("random", "trained")
            }
        row["heldout_ratio"] = row["heldout"]["trained"]["mean"] / max(row["heldout"]["random"]["mean"], 1e-9)
        rows.append(row)
        print(
            f"level {level}, {games} games, B={timesteps}: held-out trained "
            f"{row['heldout']['trained']['mean']:.2f} ± {row['heldout']['trained']['std']:.2f}, "
            f"random {row['heldout']['random']['mean']:.2f}, ratio {row['heldout_ratio']:.2f}; "
            f"training games {row['train']['trained']['mean']:.2f}",
            flush=True,
        )
    recipe = {
        k: v
        for k, v in asdict(settings_for(0, 0, 0, 0, Path(args.runs), args.games_dir)).items()
        if k
        in (
            "algo",
            "max_steps",
            "max_actions",
            "num_envs",
            "n_steps",
            "batch_size",
            "n_epochs",
            "learning_rate",
            "ent_coef",
            "eval_episodes",
        )
    }
    payload = {"recipe": recipe, "rows": rows}
    if args.out:
        write_json(args.out, payload)


if __name__ == "__main__":
    main()
