"""The TextWorld workload the simulator-speed benchmarks share: suite games, their offline data, the server.

``bench_sim_speed.py`` (simulated against real steps per second) and ``bench_sim_breakdown.py`` (where a
simulated step's time goes) play the same games with the same random admissible commands through the
same env settings, so their figures describe one workload.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games
from dreamgym_env.real.textworld_suite import build_suite
from dreamgym_env.records import Transition
from dreamgym_env.rollout import unbatch_infos
from dreamgym_env.serving.shipped import recommended_env_kwargs, serve_shipped_model


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """The options that choose the games, the server and the env settings."""
    parser.add_argument("--games", type=int, default=16, help="Training games of the suite to play.")
    parser.add_argument("--suite", default=None, help="Suite folder (default: a temporary one).")
    parser.add_argument("--base-url", help="A served shipped model (default: serve it here).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-memo",
        action="store_true",
        help="Ask the model for every step the rules and retrieved demonstrations do not answer (memo_size=0).",
    )
    parser.add_argument(
        "--server-arg", action="append", default=[], help="Extra vLLM server flag (repeatable)."
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        help="KEY=VALUE for the server's environment (repeatable).",
    )
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        help="KEY=VALUE (JSON value) added to the simulator's gymnasium.make_vec keywords (repeatable).",
    )


@dataclass
class Workload:
    """Games, their offline data (the simulator retrieves from it and replays it) and the env keywords."""

    games: list[str]
    buffer: ReplayBuffer
    sim_kwargs: dict[str, Any]
    offline: list[Transition] | None = None
    server: Any = None


@contextlib.contextmanager
def workload(args: argparse.Namespace, max_steps: int) -> Iterator[Workload]:
    """Build (or reuse) the suite and its offline data, serve the shipped model unless ``--base-url``."""
    suite_dir = args.suite or tempfile.mkdtemp(prefix="sim-speed-")
    games = build_suite(suite_dir, train_games=args.games, heldout_games=0).paths("train")
    buffer = ReplayBuffer.open(Path(suite_dir) / "offline.sqlite", dedup="episode")
    if len(buffer) == 0:
        for i, game in enumerate(games):
            buffer.add_many(play_noisy_expert(game, 3, seed=i))
    server = None
    try:
        if args.base_url is None:
            env = dict(item.split("=", 1) for item in args.server_env)
            server = serve_shipped_model("textworld", extra_args=tuple(args.server_arg), env=env or None)
            args.base_url = server.base_url
        sim_kwargs = {
            "base_url": args.base_url,
            **recommended_env_kwargs("textworld"),
            "retriever": buffer,
            "store_transitions": "none",
            "max_steps": max_steps,
            "on_invalid_output": "fail_state",
            **({"memo_size": 0} if args.no_memo else {}),
        }
        for item in args.env_arg:
            key, value = item.split("=", 1)
            sim_kwargs[key] = json.loads(value)
        offline = None if args.no_memo else list(buffer.iter_transitions())
        yield Workload(games, buffer, sim_kwargs, offline, server)
    finally:
        if server is not None:
            server.stop()
        buffer.close()


@dataclass
class SimRun:
    """One timed stretch of simulated play."""

    steps: int
    seconds: float
    cpu_seconds: float
    answered_by: Counter[str]
    infos: list[dict[str, Any]]


def play_sim(work: Workload, envs: int, steps: int, seed: int) -> SimRun:
    """``steps`` vector steps of a concurrent vector env of ``envs`` episodes, random admissible commands.

    Who answered each step (``info["answered_by"]``): ``model`` (a request), ``rule`` (the domain's
    rules), ``replay`` (a real transition of the offline data) or ``memo`` (an answer the model already
    gave to the same step, in this vector env). Each call starts with a new memo holding the offline
    data only, as a training run starts. ``cpu_seconds`` is this process's CPU time (the client's:
    the server is a process of its own).
    """
    vec = gym.make_vec(
        "DreamGym/TextWorld-v0", num_envs=envs, tasks=tasks_from_games(work.games), **work.sim_kwargs
    )
    backend = vec.unwrapped.backend  # type: ignore[attr-defined]
    if hasattr(backend, "start"):  # the in-process engine starts before the clock, as a server does
        backend.start()
    memo = vec.unwrapped.step_memo  # type: ignore[attr-defined]
    if memo is not None and work.offline is not None:
        memo.add_real(work.offline)
    rng = np.random.default_rng(seed)
    _, infos = vec.reset(seed=seed)
    answered: Counter[str] = Counter()
    kept: list[dict[str, Any]] = []
    taken = 0
    cpu, started = time.process_time(), time.perf_counter()
    for _ in range(steps):
        actions = [str(rng.choice(list(a) or ["look"])) for a in infos["admissible_actions"]]
        _, _, _, _, infos = vec.step(actions)  # autoreset: a finished episode starts again next step
        taken += envs
        for info in unbatch_infos(infos, envs):
            if "answered_by" in info:
                answered[str(info["answered_by"])] += 1
                kept.append(info)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    vec.close()
    return SimRun(taken, seconds, cpu, answered, kept)
