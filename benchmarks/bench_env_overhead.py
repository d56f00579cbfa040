"""Env overhead per step: everything a step costs except waiting for the model.

The model is the scripted fake (no latency), so each step's time is prompt building, retrieval from the
replay buffer (top-4), parsing and validation, bookkeeping, the buffer write and the hop from the
caller's thread to the env's event loop. Buffer sizes 0, 10k and 100k transitions of ALFWorld-like text,
side by side, with the default buffer configuration (exact search up to 10k per domain, IVF past it).

The native vector env is measured the same way, per transition: its sub-envs share one batched search
and one write transaction per step, so the fixed part of each retrieval is paid once per step.

    python benchmarks/bench_env_overhead.py [--sizes 0 10000 100000] [--steps 400] [--num-envs 32]
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from _harness import arg_parser

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend, Transition
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


def seeded_buffer(size: int) -> ReplayBuffer:
    buffer = ReplayBuffer.open(":memory:")
    if size:
        buffer.add_many(synthetic_transitions(size))
    return buffer


def measure_vector(size: int, steps: int, num_envs: int) -> dict[str, float]:
    """Per-transition overhead of the native vector env: each step's time divided by its sub-envs."""
    buffer = seeded_buffer(size)
    envs = DreamGymVectorEnv(
        "alfworld", num_envs=num_envs, backend=ScriptedBackend(), retriever=buffer, top_k=4
    )
    _, infos = envs.reset(seed=0)
    rng = np.random.default_rng(1)
    per_transition = []
    for _ in range(steps):
        actions = [
            list(a)[int(rng.integers(len(a)))] if len(a) else "look" for a in infos["admissible_actions"]
        ]
        start = time.perf_counter()
        _, _, _, _, infos = envs.step(actions)
        elapsed = time.perf_counter() - start
        transitions = int(np.count_nonzero(infos["step"]))  # sub-envs autoreset this step made none
        per_transition.append(elapsed / max(1, transitions))
    envs.close()
    buffer.close()
    ms = sorted(d * 1000 for d in per_transition)
    return {"median_ms": statistics.median(ms), "p99_ms": ms[int(0.99 * (len(ms) - 1))]}


def measure(size: int, steps: int) -> dict[str, float]:
    buffer = seeded_buffer(size)
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
        "median_ms": statistics.median(ms),
        "p99_ms": ms[int(0.99 * (len(ms) - 1))],
        "retrieve_median_ms": statistics.median(retrieve) * 1000,
    }


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 10_000, 100_000])
    parser.add_argument("--steps", type=int, default=400, help="Single-env steps per size.")
    parser.add_argument("--num-envs", type=int, default=32, help="Sub-envs of the vector env.")
    parser.add_argument("--vector-steps", type=int, default=60, help="Vector-env steps per size.")
    args = parser.parse_args()
    rows = [
        (measure(size, args.steps), measure_vector(size, args.vector_steps, args.num_envs))
        for size in args.sizes
    ]
    n = args.num_envs
    print(
        "| buffer size | single env: step overhead median (ms) | p99 (ms) | of which retrieval (ms) "
        f"| vector env N={n}: overhead per transition median (ms) | p99 (ms) | single / vector |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size, (single, vector) in zip(args.sizes, rows, strict=True):
        print(
            f"| {size:,} | {single['median_ms']:.3f} | {single['p99_ms']:.3f} | {single['retrieve_median_ms']:.3f} "
            f"| {vector['median_ms']:.3f} | {vector['p99_ms']:.3f} | {single['median_ms'] / vector['median_ms']:.2f}x |"
        )


if __name__ == "__main__":
    main()
