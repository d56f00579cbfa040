"""Steps per second of SB3's DummyVecEnv and SubprocVecEnv against the package's SB3VecEnv.

Every sub-env's model call takes a fixed latency (the scripted fake model with ``latency_s``, 50 ms by
default: a round trip to a loaded server), so the figures show how each VecEnv overlaps the calls,
not how fast a server is. All three see the same observations: ``TextEmbedding(DiscreteActions(env))``
per sub-env for SB3's two, the same features for the whole batch in ``SB3VecEnv``.

    python benchmarks/bench_sb3_vec_env.py [--num-envs 16] [--latency 0.05] [--steps 20] [--repeats 3]
    python benchmarks/bench_sb3_vec_env.py --maskable-ppo --latency 0 --sizes 1 2 4 8 16 [--json F]

``--maskable-ppo`` times sb3-contrib's ``MaskablePPO.learn`` (frames/s, rollout and update together)
over ``DummyVecEnv`` and ``SB3VecEnv`` at each size, the two taking turns: the crossover where the
concurrent VecEnv stops paying for a backend that answers at once.

``DummyVecEnv`` steps its sub-envs one after another (N round trips a step), ``SubprocVecEnv`` runs
one process per sub-env (forked here, so start-up costs nothing), ``SB3VecEnv`` sends all N requests
from one event loop (one round trip a step).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from _harness import arg_parser, format_range, take_turns, write_json
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env import ScriptedBackend
from dreamgym_env.integrations.sb3 import SB3VecEnv
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding

ENV_ID = "DreamGym/ALFWorld-v0"
MAX_ACTIONS = 16


def single(latency: float) -> Callable[[], gym.Env[Any, Any]]:
    def make() -> gym.Env[Any, Any]:
        env = gym.make(ENV_ID, backend=ScriptedBackend(latency_s=latency))
        return TextEmbedding(DiscreteActions(env, MAX_ACTIONS, on_invalid="wrap"))

    return make


def build(kind: str, n: int, latency: float) -> VecEnv:
    if kind == "DummyVecEnv":
        return DummyVecEnv([single(latency)] * n)
    if kind == "SubprocVecEnv":
        return SubprocVecEnv([single(latency)] * n, start_method="fork")
    return SB3VecEnv.make(
        ENV_ID, n, max_actions=MAX_ACTIONS, on_invalid="wrap", backend=ScriptedBackend(latency_s=latency)
    )


def steps_per_second(kind: str, n: int, latency: float, steps: int) -> float:
    """Vector steps per second over ``steps`` steps (after the reset, which is not timed)."""
    envs = build(kind, n, latency)
    try:
        envs.seed(0)
        envs.reset()
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for _ in range(steps):
            envs.step(rng.integers(MAX_ACTIONS, size=n))
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def ppo_fps(kind: str, n: int, latency: float, frames: int) -> float:
    """MaskablePPO frames per second (``learn(frames)``, rollouts of 64 steps, one epoch) over ``kind``."""
    from sb3_contrib import MaskablePPO

    envs = build(kind, n, latency)
    try:
        model = MaskablePPO("MlpPolicy", envs, n_steps=64, batch_size=256, n_epochs=1, seed=0)
        start = time.perf_counter()
        model.learn(frames)
        return frames / (time.perf_counter() - start)
    finally:
        envs.close()


def crossover(sizes: list[int], latency: float, frames: int, repeats: int, out: str | None) -> None:
    """MaskablePPO fps of DummyVecEnv and SB3VecEnv at each size; the ratio per repeat."""
    rows = []
    print(f"MaskablePPO frames/s, {latency * 1000:.0f} ms a model call, median (min-max) of {repeats} runs\n")
    print("| N | DummyVecEnv | SB3VecEnv | SB3VecEnv / DummyVecEnv |\n|---:|---:|---:|---:|")
    for n in sizes:
        kinds = ("DummyVecEnv", "SB3VecEnv")
        runs = take_turns(repeats, {k: lambda k=k, n=n: ppo_fps(k, n, latency, frames) for k in kinds})
        dummy, ours = runs["DummyVecEnv"], runs["SB3VecEnv"]
        ratios = [a / b for a, b in zip(ours, dummy, strict=True)]
        print(f"| {n} | {format_range(dummy)} | {format_range(ours)} | {format_range(ratios)} |")
        rows.append({"num_envs": n, "dummy_fps": dummy, "sb3_vec_env_fps": ours, "ratio": ratios})
    if out:
        result = {
            "benchmark": "bench_sb3_vec_env.py --maskable-ppo",
            "env_id": ENV_ID,
            "latency_s": latency,
            "frames": frames,
            "repeats": repeats,
            "rows": rows,
        }
        write_json(out, result)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05, help="Seconds each model call takes.")
    parser.add_argument("--steps", type=int, default=20, help="Vector steps per measurement.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--maskable-ppo", action="store_true", help="Time MaskablePPO.learn instead.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="With --maskable-ppo.")
    parser.add_argument("--frames", type=int, default=2048, help="With --maskable-ppo: frames per run.")
    parser.add_argument("--json", help="With --maskable-ppo: also write the runs here.")
    args = parser.parse_args()
    if args.maskable_ppo:
        crossover(args.sizes, args.latency, args.frames, args.repeats, args.json)
        return
    n = args.num_envs
    kinds = ["DummyVecEnv", "SubprocVecEnv", "SB3VecEnv"]
    steps = dict.fromkeys(kinds, args.steps) | {"DummyVecEnv": max(2, args.steps // 4)}  # Dummy is slow
    runs = take_turns(
        args.repeats,
        {kind: lambda kind=kind: steps_per_second(kind, n, args.latency, steps[kind]) for kind in kinds},
    )
    dummy = runs["DummyVecEnv"]
    print(f"N={n}, {args.latency * 1000:.0f} ms a model call, median (min-max) of {args.repeats} runs\n")
    print("| VecEnv | vector steps/s | transitions/s | / (N x DummyVecEnv) |\n|---|---:|---:|---:|")
    for kind in kinds:
        rates = runs[kind]
        rel = [a / (n * b) for a, b in zip(rates, dummy, strict=True)]
        vs_dummy = "1/N" if kind == "DummyVecEnv" else format_range(rel)
        print(f"| {kind} | {format_range(rates)} | {format_range([x * n for x in rates])} | {vs_dummy} |")
    if args.latency > 0:
        print(f"\nThe ceiling is one round trip a step: {1 / args.latency:.0f} vector steps/s.")


if __name__ == "__main__":
    main()
