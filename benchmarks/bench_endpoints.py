"""Throughput of the native vector env against 1-8 endpoints, and one endpoint killed mid-run.

Each endpoint is a stub OpenAI-compatible server in its own process (asyncio, no model): it answers
every chat completion with the same valid transition after a fixed latency, serving at most
``--slots`` requests at once (a GPU server's batch), so more endpoints mean more capacity. The client
is ``gymnasium.make_vec("DreamGym/WebShop-v0", num_envs=N, base_url=[...])`` with episode-sticky
routing, exactly as a user runs it.

  * throughput (transitions/s) for each endpoint count, median and min-max of ``--runs`` runs, next
    to the stub's capacity ``min(N, endpoints x slots) / latency``;
  * fail-over: 8 endpoints, one killed (SIGKILL) halfway through step ``--kill-after``, with its
    requests in flight; every step must succeed
    (the killed endpoint's episodes move to live ones); the step times around the kill.

    python benchmarks/bench_endpoints.py [--envs 256] [--endpoints 1 2 4 8] [--steps 6] [--runs 3]
"""

from __future__ import annotations

import threading
import time
from typing import Any

import gymnasium as gym
from _endpoints import ACTION, Endpoints
from _harness import arg_parser, format_range

import dreamgym_env  # noqa: F401 - registers the ids

ENV_ID = "DreamGym/WebShop-v0"


def _make(urls: list[str], n: int) -> Any:
    return gym.make_vec(
        ENV_ID,
        num_envs=n,
        base_url=urls,
        model="stub",
        max_steps=1000,
        timeout=30.0,  # one endpoint queues N / slots waves: its last requests wait (N / slots) x latency
        on_invalid_output="fail_state",
    )


def _run(
    urls: list[str], n: int, steps: int, kill: tuple[Endpoints, int, float] | None = None
) -> dict[str, Any]:
    """One run: an untimed warm-up step, then ``steps`` timed steps; returns rates and step times."""
    envs = _make(urls, n)
    envs.reset(seed=0)
    actions = [ACTION] * n
    envs.step(actions)  # connections opened, routes settled
    times, failed = [], 0
    cpu, start = time.process_time(), time.perf_counter()
    for step in range(steps):
        if kill is not None and step == kill[1]:  # mid-step: while its requests are in flight
            threading.Timer(kill[2], kill[0].kill, (0,)).start()
        began = time.perf_counter()
        try:
            envs.step(actions)
        except Exception as e:  # noqa: BLE001 - counted and reported
            failed += 1
            print(f"    step {step} failed: {type(e).__name__}: {e}")
        times.append(time.perf_counter() - began)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    envs.close()
    return {"rate": n * steps / wall, "cpu_ms": 1000 * cpu / (n * steps), "times": times, "failed": failed}


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--envs", type=int, default=256, help="concurrent episodes (num_envs)")
    parser.add_argument("--endpoints", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--steps", type=int, default=4, help="timed vector steps per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.5, help="stub seconds per request")
    parser.add_argument("--slots", type=int, default=16, help="requests one stub serves at once")
    parser.add_argument("--kill-after", type=int, default=3, help="timed steps before one endpoint dies")
    args = parser.parse_args()
    n = args.envs

    print(f"N={n} episodes, stub latency {args.latency * 1000:.0f} ms, {args.slots} slots per endpoint,")
    print(f"{args.steps} timed steps per run, {args.runs} runs; median (min-max)\n")
    print("| endpoints | transitions/s | stub capacity | client CPU ms / transition |")
    print("|---|---|---|---|")
    for k in args.endpoints:
        endpoints = Endpoints(k, args.latency, args.slots)
        try:
            runs = [_run(endpoints.urls, n, args.steps) for _ in range(args.runs)]
        finally:
            endpoints.close()
        capacity = min(n, k * args.slots) / args.latency
        print(
            f"| {k} | {format_range([r['rate'] for r in runs], '{:.0f}')} | {capacity:.0f} | "
            f"{format_range([r['cpu_ms'] for r in runs], '{:.2f}')} |"
        )

    print(f"\nOne of 8 endpoints killed (SIGKILL) halfway through timed step {args.kill_after}:\n")
    print("| run | failed steps | transitions/s | step before (s) | step of the kill (s) | step after (s) |")
    print("|---|---|---|---|---|---|")
    kill_steps, rates, failed = [], [], 0
    for run in range(args.runs):
        endpoints = Endpoints(8, args.latency, args.slots)
        try:
            result = _run(
                endpoints.urls,
                n,
                max(args.steps, args.kill_after + 2),
                (endpoints, args.kill_after, args.latency / 2),
            )
        finally:
            endpoints.close()
        t = result["times"]
        i = args.kill_after
        kill_steps.append(t[i])
        rates.append(result["rate"])
        failed += result["failed"]
        print(
            f"| {run + 1} | {result['failed']} | {result['rate']:.0f} | {t[i - 1]:.3f} | {t[i]:.3f} | {t[i + 1]:.3f} |"
        )
    print(
        f"\nfailed steps in all runs: {failed}; step of the kill {format_range(kill_steps, '{:.3f}')} s; "
        f"transitions/s with the kill {format_range(rates, '{:.0f}')}"
    )


if __name__ == "__main__":
    main()
