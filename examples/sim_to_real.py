"""Sim-to-real on TextWorld: the same policy plays the simulator, then the real game engine.

TextWorld generates its games locally, so this runs anywhere `pip install "dreamgym-env[real]"` does.
The simulated env starts each episode from the real game's first state (``tasks_from_games``); after
``--sim-episodes`` episodes the SimToRealEnv switches to the real engine, and every real transition is
written to the replay buffer with ``source="real"``.

    python examples/sim_to_real.py                                   # scripted fake model, no server
    python examples/sim_to_real.py --base-url http://127.0.0.1:8000/v1 --model my-experience-model
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from dreamgym_env import DreamGymEnv
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.domains.textworld import TextWorldDomain
from dreamgym_env.real.textworld import TextWorldRealEnv, make_games, tasks_from_games
from dreamgym_env.wrappers import SimToRealEnv, SimToRealSchedule


@dataclass
class Args:
    games: int = 3
    sim_episodes: int = 3
    real_episodes: int = 3
    seed: int = 0
    base_url: str | None = None
    model: str | None = None
    buffer: str = ":memory:"


class RandomAdmissiblePolicy:
    """A stand-in for a trained agent: a random admissible action (it only reads obs and info)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        actions = info["admissible_actions"] or ["look"]
        return str(actions[int(self.rng.integers(len(actions)))])


def main(args: Args) -> None:
    workdir = tempfile.mkdtemp(prefix="dreamgym_tw_")
    games = make_games(workdir, n=args.games, seed=args.seed)
    tasks = tasks_from_games(games)
    backend: dict[str, Any] = (
        {"base_url": args.base_url, "model": args.model} if args.base_url else {"backend": "scripted"}
    )
    sim = DreamGymEnv(TextWorldDomain(), tasks=tasks, **backend)
    real = TextWorldRealEnv(games)
    policy = RandomAdmissiblePolicy(args.seed)
    with ReplayBuffer.open(args.buffer) as buffer:
        env = SimToRealEnv(
            sim, real, schedule=SimToRealSchedule(switch_after=args.sim_episodes), retriever=buffer
        )
        for episode in range(args.sim_episodes + args.real_episodes):
            obs, info = env.reset(seed=args.seed + episode)
            total, steps, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, info = env.step(policy(obs, info))
                total, steps, done = total + reward, steps + 1, terminated or truncated
            print(
                f"episode {episode}: {info['source']:4s} task={info['task_id']} steps={steps} "
                f"return={total:.1f} success={info['success']}"
            )
        print(f"real transitions in the buffer: {len(buffer)}")
        env.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name, default in vars(Args()).items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=type(default) if default is not None else str, default=default
        )
    main(Args(**vars(parser.parse_args())))
