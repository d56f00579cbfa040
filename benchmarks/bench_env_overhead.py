"""Env overhead per step: everything a step costs except waiting for the model.

The model is the scripted fake (no latency), so each step's time is prompt building, retrieval from the
replay buffer (top-4), parsing and validation, bookkeeping, the buffer write and the hop from the
caller's thread to the env's event loop. Buffer sizes 0, 10k and 100k transitions of ALFWorld-like text,
side by side, with the default buffer configuration (exact search up to 10k per domain, IVF past it).

    python benchmarks/bench_env_overhead.py [--sizes 0 10000 100000] [--steps 400]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dreamgym_env import DreamGymEnv, ScriptedBackend, Transition
from dreamgym_env.buffer import ReplayBuffer

OBJECTS = ["apple", "mug", "knife", "plate", "book", "lamp", "towel", "soapbar", "spraybottle", "cd", "pen"]
PLACES = ["cabinet", "countertop", "drawer", "shelf", "fridge", "microwave", "sinkbasin", "desk", "sidetable"]


def synthetic_transitions(n: int, seed: int = 0) -> list[Transition]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        obj, place = rng.choice(OBJECTS), rng.choice(PLACES)
        k = int(rng.integers(1, 6))
        state = f"On the {place} {k}, you see a {obj} {k}, a {rng.choice(OBJECTS)} 2, and a {rng.choice(OBJECTS)} 1."
        action = f"take {obj} {k} from {place} {k}"
        out.append(
            Transition(
                domain="alfworld",
                task_id=f"t{i % 500}",
                task=f"put a {obj} in {place}",
                episode_id=f"e{i // 20}",
                step=i % 20,
                state=state,
                action=action,
                next_state=f"You pick up the {obj} {k} from the {place} {k}.",
                source="offline",
            )
        )
    return out


def measure(size: int, steps: int) -> dict[str, float]:
    buffer = ReplayBuffer.open(":memory:")
    if size:
        buffer.add_many(synthetic_transitions(size))
    # The domain's own step limit (ALFWorld: 50): episodes, and so histories, are as long as in training.
    env = DreamGymEnv("alfworld", backend=ScriptedBackend(), retriever=buffer, top_k=4)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(1)
    durations, retrieve = [], []
    for _ in range(steps):
        actions = info["admissible_actions"] or ["look"]
        action = actions[int(rng.integers(len(actions)))]
        start = time.perf_counter()
        obs, _, terminated, truncated, info = env.step(action)
        durations.append(time.perf_counter() - start)
        retrieve.append(info.get("timing", {}).get("retrieve_s", 0.0))
        if terminated or truncated:
            obs, info = env.reset()
    buffer.close()
    ms = sorted(d * 1000 for d in durations)
    return {
        "size": size,
        "median_ms": statistics.median(ms),
        "p99_ms": ms[int(0.99 * (len(ms) - 1))],
        "retrieve_median_ms": statistics.median(retrieve) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 10_000, 100_000])
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    rows = [measure(size, args.steps) for size in args.sizes]
    base = rows[0]["median_ms"]
    print(
        "| buffer size | step overhead median (ms) | p99 (ms) | of which retrieval, median (ms) | vs empty buffer |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['median_ms']:.3f} | {r['p99_ms']:.3f} | {r['retrieve_median_ms']:.3f} | "
            f"{r['median_ms'] / base:.2f}x |"
        )


if __name__ == "__main__":
    main()
