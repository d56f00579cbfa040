"""Collect real MiniWoB++ transitions (scripted solutions and random clicks) into a replay buffer.

Plays the packaged task pages (``dreamgym_env/domains/data/miniwob_tasks.jsonl``) in
``DreamGym/MiniWoB-Real-v0``: per page one scripted episode (``miniwob_policies.solution``) and
``--random-episodes`` episodes of :func:`~dreamgym_env.domains.miniwob.policies.random_action`, and
stores every transition in a SQLite buffer for ``dreamgym build-sft`` / ``eval-fidelity``. Prints
(and writes to ``<out>/collection.json``) each policy's success rate on the real pages.

    python scripts/collect_miniwob.py --out runs/miniwob --seeds 0 1 2 --random-episodes 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.domains.miniwob import load_miniwob_tasks
from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS, random_action, solution
from dreamgym_env.real import register_real_envs
from dreamgym_env.records import Task, Transition


def play(env: gym.Env, task: Task, policy: str, rng: np.random.Generator, max_steps: int, seed: int) -> list:
    """One episode of ``policy`` ("scripted" or "random") on ``task``'s page; its transitions."""
    obs, info = env.reset(seed=seed, options={"task": task})
    plan = solution(task.metadata["miniwob_task"], info["task"], obs) if policy == "scripted" else []
    transitions: list[Transition] = []
    for step in range(max_steps):
        action = plan[step] if policy == "scripted" and step < len(plan) else random_action(obs, rng)
        if policy == "scripted" and step >= len(plan):
            break
        obs, reward, terminated, truncated, info = env.step(action)
        last = env.unwrapped.last_transition
        if last is not None:
            transitions.append(last.model_copy(update={"metadata": {**last.metadata, "policy": policy}}))
        if terminated or truncated:
            break
    return transitions


def main() -> None:
    """Parse the arguments, play every page, store the transitions, print the success rates."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="page seeds to play")
    parser.add_argument("--random-episodes", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=5, help="steps of a random episode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    register_real_envs()
    tasks = [
        t
        for t in load_miniwob_tasks()
        if t.metadata["seed"] in args.seeds and t.metadata["miniwob_task"] in SOLVED_TASKS
    ]
    rng = np.random.default_rng(args.seed)
    env = gym.make("DreamGym/MiniWoB-Real-v0")
    started = time.perf_counter()
    outcomes: dict[str, list[float]] = {"scripted": [], "random": []}
    stored: list[Transition] = []
    try:
        for i, task in enumerate(tasks):
            for k, policy in enumerate(["scripted"] + ["random"] * args.random_episodes):
                episode = play(env, task, policy, rng, args.max_steps, seed=1000 * i + k)
                stored += episode
                outcomes[policy].append(float(bool(episode) and episode[-1].success))
            print(f"{i + 1}/{len(tasks)} {task.task_id}: {len(stored)} transitions", flush=True)
    finally:
        env.close()
    with ReplayBuffer.open(args.out / "real.sqlite") as buffer:
        result = buffer.add_many(stored)
    summary = {
        "pages": len(tasks),
        "transitions": len(stored),
        "stored": result.stored,
        "seconds": round(time.perf_counter() - started, 1),
        "success": {
            p: {"episodes": len(v), "rate": float(np.mean(v)) if v else 0.0} for p, v in outcomes.items()
        },
    }
    (args.out / "collection.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
