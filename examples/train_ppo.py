"""Train stable-baselines3 (Maskable)PPO on a DreamGym env through the SB3 adapters.

The same script trains on the simulator or on the real TextWorld engine: only ``--env-id`` changes
(the recipe is :mod:`dreamgym_env.training.ppo`, shared with the benchmarks).

    # real TextWorld games ("real", "sb3" and "plot" extras; 5-10 minutes on 2 CPU cores)
    python examples/train_ppo.py --env-id DreamGym/TextWorld-Real-v0
    # the simulator, here with the scripted fake model (no server; it checks the plumbing only)
    python examples/train_ppo.py --env-id DreamGym/TextWorld-v0 --backend scripted --total-timesteps 2000
    # the simulator with a served experience model
    python examples/train_ppo.py --env-id DreamGym/TextWorld-v0 --base-url http://127.0.0.1:8000/v1 --model M

A progress bar follows training; the success rate of training episodes is plotted to
``<out-dir>/success_rate.png``, and the trained policy is evaluated against a uniform random
admissible policy on the training games (new episode seeds) and on held-out games.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.training.ppo import PPOSettings, train_and_evaluate


def parse_args() -> PPOSettings:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(PPOSettings):
        flag = f"--{f.name.replace('_', '-')}"
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument(flag, type=kind, default=f.default)
    return PPOSettings(**vars(parser.parse_args()))


if __name__ == "__main__":
    train_and_evaluate(parse_args())
