"""Simulated against real TextWorld steps per second: the same games, envs and step count, in one run.

Plays ``--envs`` episodes side by side for ``--steps`` steps each, with random admissible commands
(seeded), twice per repeat: in the real TextWorld engine (one game process per env, stepped one after
another, as a Gymnasium sync vector env does) and in the simulator (``DreamGym/TextWorld-v0`` as one
concurrent vector env, the shipped experience model served by vLLM's OpenAI server). Prints each
repeat, then the median and min-max of both figures and their ratio (simulated / real), and writes
them as JSON.

    python benchmarks/bench_sim_speed.py --envs 64 --steps 8 --repeats 3 --out docs/results/sim_speed.json
    python benchmarks/bench_sim_speed.py --base-url http://127.0.0.1:8000/v1   # a server already running
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from _harness import arg_parser, git_commit, median_range, write_json

warnings.filterwarnings("ignore")

import dreamgym_env  # noqa: E402,F401 - registers the ids
from dreamgym_env.buffer import ReplayBuffer  # noqa: E402
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games  # noqa: E402
from dreamgym_env.real.textworld_suite import build_suite  # noqa: E402
from dreamgym_env.rollout import unbatch_infos  # noqa: E402
from dreamgym_env.serving.shipped import recommended_env_kwargs, serve_shipped_model  # noqa: E402
from dreamgym_env.types import Transition  # noqa: E402


def play_real(games: list[str], envs: int, steps: int, seed: int) -> tuple[int, float]:
    """Steps taken and seconds spent by ``envs`` real episodes stepped in turn (resets not timed)."""
    made = [
        gym.make("DreamGym/TextWorld-Real-v0", game_files=games, max_steps=steps + 1) for _ in range(envs)
    ]
    rng = np.random.default_rng(seed)
    infos = [env.reset(seed=seed + i)[1] for i, env in enumerate(made)]
    taken, started = 0, time.perf_counter()
    for _ in range(steps):
        for i, env in enumerate(made):
            actions = infos[i]["admissible_actions"] or ["look"]
            _, _, terminated, truncated, infos[i] = env.step(str(rng.choice(actions)))
            taken += 1
            if terminated or truncated:
                infos[i] = env.reset()[1]
    seconds = time.perf_counter() - started
    for env in made:
        env.close()
    return taken, seconds


def play_sim(
    games: list[str],
    envs: int,
    steps: int,
    seed: int,
    sim_kwargs: dict[str, Any],
    offline: list[Transition] | None = None,
) -> tuple[int, float, Counter[str]]:
    """Steps taken, seconds spent and who answered each step, for a concurrent vector env of ``envs`` episodes.

    Who answered: ``model`` (a request), ``rule`` (the domain's rules), ``replay`` (a real
    transition of the offline data) or ``memo`` (an answer the model already gave to the same step,
    in this vector env), from ``info["answered_by"]``. Each call starts with a new memo, holding the
    offline data only (``offline``), as a training run starts.
    """
    vec = gym.make_vec("DreamGym/TextWorld-v0", num_envs=envs, tasks=tasks_from_games(games), **sim_kwargs)
    memo = vec.unwrapped.step_memo  # type: ignore[attr-defined]
    if memo is not None and offline is not None:
        memo.add_real(offline)
    rng = np.random.default_rng(seed)
    _, infos = vec.reset(seed=seed)
    answered: Counter[str] = Counter()
    taken, started = 0, time.perf_counter()
    for _ in range(steps):
        actions = [str(rng.choice(list(a) or ["look"])) for a in infos["admissible_actions"]]
        _, _, _, _, infos = vec.step(actions)  # autoreset: a finished episode starts again next step
        taken += envs
        answered.update(str(i["answered_by"]) for i in unbatch_infos(infos, envs) if "answered_by" in i)
    seconds = time.perf_counter() - started
    vec.close()
    return taken, seconds, answered


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8, help="Steps per env per repeat.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", type=int, default=16, help="Training games of the suite to play.")
    parser.add_argument("--suite", default=None, help="Suite folder (default: a temporary one).")
    parser.add_argument("--base-url", help="A served shipped model (default: serve it here).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-memo",
        action="store_true",
        help="Ask the model for every step the rules and retrieved demonstrations do not answer (memo_size=0).",
    )
    parser.add_argument("--out", help="Write the result as JSON here.")
    parser.add_argument(
        "--server-arg", action="append", default=[], help="Extra vLLM server flag (repeatable)."
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        help="KEY=VALUE for the server's environment (repeatable).",
    )
    args = parser.parse_args()

    suite_dir = args.suite or tempfile.mkdtemp(prefix="sim-speed-")
    games = build_suite(suite_dir, train_games=args.games, heldout_games=0).paths("train")
    # The simulator retrieves from the games' real offline data, as it does in training.
    buffer = ReplayBuffer.open(Path(suite_dir) / "offline.sqlite", dedup="episode")
    if len(buffer) == 0:
        for i, game in enumerate(games):
            buffer.add_many(play_noisy_expert(game, 3, seed=i))
    server = None
    if args.base_url is None:
        env = dict(item.split("=", 1) for item in args.server_env)
        server = serve_shipped_model("textworld", extra_args=tuple(args.server_arg), env=env or None)
        args.base_url = server.base_url
    sim_kwargs = {
        "base_url": args.base_url,
        **recommended_env_kwargs("textworld"),
        "retriever": buffer,
        "store_transitions": "none",
        "max_steps": args.steps + 1,
        "on_invalid_output": "fail_state",
        **({"memo_size": 0} if args.no_memo else {}),
    }
    real_rates, sim_rates = [], []
    answered: Counter[str] = Counter()
    try:
        offline = None if args.no_memo else list(buffer.iter_transitions())
        play_sim(games, args.envs, 1, args.seed, sim_kwargs)  # warm-up: compile, caches
        for repeat in range(args.repeats):
            seed = args.seed + 1000 * repeat
            r_steps, r_secs = play_real(games, args.envs, args.steps, seed)
            s_steps, s_secs, who = play_sim(games, args.envs, args.steps, seed, sim_kwargs, offline)
            answered += who
            real_rates.append(r_steps / r_secs)
            sim_rates.append(s_steps / s_secs)
            print(
                f"repeat {repeat}: real {real_rates[-1]:.1f} steps/s ({r_steps} in {r_secs:.1f}s), "
                f"simulated {sim_rates[-1]:.1f} steps/s ({s_steps} in {s_secs:.1f}s; answered by {dict(who)})",
                flush=True,
            )
    finally:
        if server is not None:
            server.stop()
        buffer.close()
    ratios = [s / r for s, r in zip(sim_rates, real_rates, strict=True)]
    result = {
        "ratio": statistics.median(sim_rates) / statistics.median(real_rates),
        "ratio_per_repeat": median_range(ratios, count=False),
        "simulated_steps_per_s": median_range(sim_rates, count=False),
        "real_steps_per_s": median_range(real_rates, count=False),
        "simulated_steps_answered_by": dict(answered),
        "envs": args.envs,
        "steps_per_env": args.steps,
        "repeats": args.repeats,
        "games": len(games),
        "memo": not args.no_memo,
        "commit": git_commit(),
        "server_args": args.server_arg,
        "server_env": args.server_env,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
