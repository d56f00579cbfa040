"""Simulated against real TextWorld steps per second: the same games, envs and step count, in one run.

Plays ``--envs`` episodes side by side for ``--steps`` steps each, with random admissible commands
(seeded), twice per repeat: in the real TextWorld engine (one game process per env, stepped one after
another, as a Gymnasium sync vector env does) and in the simulator (``DreamGym/TextWorld-v0`` as one
concurrent vector env, the shipped experience model served by vLLM's OpenAI server). Prints each
repeat, then the median and min-max of both figures and their ratio (simulated / real), and writes
them as JSON, with what each repeat's requests cost the server (vLLM's ``/metrics``: answer lengths,
engine iterations per vector step, the share of speculated tokens kept).

    python benchmarks/bench_sim_speed.py --envs 64 --steps 8 --repeats 3 --out docs/results/sim_speed.json
    python benchmarks/bench_sim_speed.py --base-url http://127.0.0.1:8000/v1   # a server already running
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings
from collections import Counter

import gymnasium as gym
import numpy as np
from _harness import arg_parser, git_commit, median_range, write_json

warnings.filterwarnings("ignore")

from _textworld_sim import add_workload_args, play_sim, workload  # noqa: E402 - imports the package
from _vllm_metrics import metrics_delta, read_metrics  # noqa: E402

from dreamgym_env.serving.shipped import shipped_model_dir, weights_checksum  # noqa: E402


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


def server_summary(delta: dict[str, float], vector_steps: int) -> dict[str, float]:
    """What one repeat's requests cost the server: prompt and answer lengths, engine iterations, speculation.

    A vector step waits for its longest answer, so iterations per vector step (not tokens) is what the
    simulated steps/s follows; ``prefix_hit_share`` is the share of prompt tokens served from the prefix
    cache (the rest is prefill), ``accepted_share`` the share of speculated tokens the model kept.
    """
    requests = max(delta["requests"], 1.0)
    return {
        "requests": delta["requests"],
        "prompt_tokens_per_request": round(delta["prompt_tokens"] / requests, 1),
        "prefix_hit_share": round(delta["prefix_cache_hits"] / max(delta["prefix_cache_queries"], 1.0), 3),
        "generated_tokens_per_request": round(delta["generation_tokens"] / requests, 1),
        "iterations_per_vector_step": round(delta["iterations"] / vector_steps, 1),
        "accepted_share": round(delta["accepted_tokens"] / max(delta["draft_tokens"], 1.0), 3),
    }


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8, help="Steps per env per repeat.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="Write the result as JSON here.")
    add_workload_args(parser)
    args = parser.parse_args()

    real_rates, sim_rates = [], []
    servers: list[dict[str, float]] = []
    answered: Counter[str] = Counter()
    # The model measured: the packaged one this run serves (unknown behind --base-url).
    served = None if args.base_url else weights_checksum(shipped_model_dir("textworld"))
    with workload(args, args.steps + 1) as work:
        play_sim(work, args.envs, 1, args.seed)  # warm-up: compile, caches
        for repeat in range(args.repeats):
            seed = args.seed + 1000 * repeat
            r_steps, r_secs = play_real(work.games, args.envs, args.steps, seed)
            before = read_metrics(args.base_url)
            sim = play_sim(work, args.envs, args.steps, seed)
            servers.append(server_summary(metrics_delta(before, read_metrics(args.base_url)), args.steps))
            answered += sim.answered_by
            real_rates.append(r_steps / r_secs)
            sim_rates.append(sim.steps / sim.seconds)
            print(
                f"repeat {repeat}: real {real_rates[-1]:.1f} steps/s ({r_steps} in {r_secs:.1f}s), "
                f"simulated {sim_rates[-1]:.1f} steps/s ({sim.steps} in {sim.seconds:.1f}s; "
                f"answered by {dict(sim.answered_by)}; server {servers[-1]})",
                flush=True,
            )
    ratios = [s / r for s, r in zip(sim_rates, real_rates, strict=True)]
    result = {
        "ratio": statistics.median(sim_rates) / statistics.median(real_rates),
        "ratio_per_repeat": median_range(ratios, count=False),
        "simulated_steps_per_s": median_range(sim_rates, count=False),
        "real_steps_per_s": median_range(real_rates, count=False),
        "simulated_steps_answered_by": dict(answered),
        "server_per_repeat": servers,
        "weights_sha256": served,
        "envs": args.envs,
        "steps_per_env": args.steps,
        "repeats": args.repeats,
        "games": len(work.games),
        "memo": not args.no_memo,
        "setting": work.sim_kwargs.get("setting", "privileged"),
        "commit": git_commit(),
        "server_args": args.server_arg,
        "server_env": args.server_env,
        "env_args": args.env_arg,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
