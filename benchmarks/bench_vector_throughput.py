"""Transitions per second against one real vLLM server: native vector env vs Gymnasium's Sync/Async.

Side by side in one run, same server, same prompts (greedy decoding, same seeds and actions), each size
after an untimed pass that warms vLLM's prefix cache for everyone:
  * native ``DreamGymVectorEnv``, ``SyncVectorEnv`` and ``AsyncVectorEnv`` at N = 1, 8, 32, 128;
  * the physical limit: the very requests the native env sent, fired straight at the server with N in
    flight (no env at all), and the native env's throughput as a fraction of it;
  * prefix-cache hit rate (vLLM's own /metrics counters) of our prompt order against a naive order;
  * memory per sub-env (native: heap growth in this process; async: resident memory of its workers).

Without ``--base-url`` it builds and serves the smoke model on vLLM's CPU build (about a minute).

    python benchmarks/bench_vector_throughput.py [--sizes 1 8 32 128] [--steps 4] [--async-max 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import re
import time
import tracemalloc
import urllib.request
from dataclasses import replace

import gymnasium as gym
import openai
import psutil

import dreamgym_env
from dreamgym_env.config import BackendConfig
from dreamgym_env.experience.backends import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.prompt import OUTPUT_INSTRUCTIONS

ENV_ID = "DreamGym/ALFWorld-v0"
CAPS = dict(
    max_state_chars=240,
    max_reasoning_chars=120,
    max_admissible_actions=4,
    max_action_chars=40,
    max_tokens=600,
    temperature=0.0,
    on_invalid_output="fail_state",
    max_steps=1000,
)


class Capturing(Backend):
    """Forwards to a real backend and keeps every request, to replay them straight at the server."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.requests: list[CompletionRequest] = []

    async def acomplete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        return await self.inner.acomplete(request)


class NaiveOrder(Backend):
    """Rebuilds each prompt with the per-step parts first, as a naive template would."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    async def acomplete(self, request: CompletionRequest) -> Completion:
        q = request.query
        assert q is not None
        history = "".join(f"State:\n{s.state}\nAction: {s.action}\n\n" for s in q.history)
        user = (
            f"Current state:\n{q.state}\nAction: {q.action}\n\n# Interaction so far\n{history}"
            f"# Task\n{q.task.instruction}\nPredict the next state."
        )
        system = f"{OUTPUT_INSTRUCTIONS}\n\n{dreamgym_env.get_domain(q.domain).instructions}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return await self.inner.acomplete(replace(request, messages=messages))


def run_env(envs, steps: int) -> tuple[float, int, int]:
    """Seconds, transitions and generated tokens of ``steps`` vector steps.

    Only model-predicted transitions count: a sub-env whose episode the model ended spends its next
    step on the autoreset, which reports no ``usage``.
    """
    envs.reset(seed=0)
    n = envs.num_envs
    tokens = transitions = 0
    start = time.perf_counter()
    for _ in range(steps):
        *_, infos = envs.step(["look"] * n)
        usage = infos.get("usage", {})
        tokens += sum(int(t) for t in usage.get("completion_tokens", []) if t is not None)
        transitions += int(infos["_usage"].sum()) if "_usage" in infos else 0
    return time.perf_counter() - start, transitions, tokens


def make_envs(server, n: int, mode: str = "native", backend: Backend | None = None):
    """``n`` sub-envs vectorised ``native`` (DreamGymVectorEnv), ``sync`` or ``async`` (Gymnasium's)."""
    kwargs = dict(base_url=server["base_url"], model=server["model"], **CAPS)
    if backend is not None:
        kwargs["backend"] = backend
    if mode != "native":
        kwargs["vectorization_mode"] = mode
    return gym.make_vec(ENV_ID, num_envs=n, **kwargs)


def measure(envs, steps: int) -> tuple[float, int, int]:
    """:func:`run_env`, then close the envs: open connection pools must not pile up between runs."""
    try:
        return run_env(envs, steps)
    finally:
        envs.close()


def backend_for(server) -> OpenAIBackend:
    return OpenAIBackend(
        BackendConfig(
            base_url=server["base_url"],
            model=server["model"],
            **{k: CAPS[k] for k in ("max_tokens", "temperature")},
        )
    )


async def fire_direct(
    server, requests: list[CompletionRequest], concurrency: int, *, bursts: bool = False
) -> tuple[float, int]:
    """Seconds and generated tokens to answer ``requests`` with ``concurrency`` in flight.

    ``bursts=False`` keeps ``concurrency`` requests in flight continuously; ``bursts=True`` sends them in
    waves of ``concurrency`` (the arrival pattern of a lock-step vector env, without the env).
    """
    client = openai.AsyncOpenAI(base_url=server["base_url"], api_key="EMPTY", timeout=120)
    semaphore = asyncio.Semaphore(concurrency)
    backend = backend_for(server)

    async def one(request: CompletionRequest) -> int:
        async with semaphore:
            response = await client.chat.completions.create(**backend._request_kwargs(request))
            return response.usage.completion_tokens if response.usage else 0

    start = time.perf_counter()
    if bursts:
        tokens = []
        for i in range(0, len(requests), concurrency):
            tokens += await asyncio.gather(*(one(r) for r in requests[i : i + concurrency]))
    else:
        tokens = await asyncio.gather(*(one(r) for r in requests))
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed, sum(tokens)


def _with_count(result: tuple[float, int], transitions: int) -> tuple[float, int, int]:
    seconds, tokens = result
    return seconds, transitions, tokens


def prefix_counters(server) -> tuple[float, float]:
    text = (
        urllib.request.urlopen(server["base_url"].removesuffix("/v1") + "/metrics", timeout=10)
        .read()
        .decode()
    )

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))

    return total("vllm:prefix_cache_hits_total"), total("vllm:prefix_cache_queries_total")


def hit_rate(server, backend: Backend, episodes: int = 4, steps: int = 6) -> float:
    hits0, queries0 = prefix_counters(server)
    env = gym.make(ENV_ID, backend=backend, **CAPS)
    for seed in range(episodes):
        env.reset(seed=100 + seed)
        for _ in range(steps):
            *_, terminated, truncated, _ = env.step("look")
            if terminated or truncated:  # the model may end an episode at any step
                env.reset()
    env.close()
    hits1, queries1 = prefix_counters(server)
    return (hits1 - hits0) / max(queries1 - queries0, 1)


def native_memory_per_env(server, n: int, steps: int) -> float:
    gc.collect()
    tracemalloc.start()
    envs = make_envs(server, n)
    run_env(envs, steps)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    envs.close()
    return current / n


def async_memory_per_env(server, n: int) -> float:
    envs = make_envs(server, n, "async")
    envs.reset(seed=0)
    children = psutil.Process().children(recursive=True)
    rss = sum(c.memory_info().rss for c in children if "vllm" not in " ".join(c.cmdline()))
    envs.close()
    return rss / n


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--steps", type=int, default=4, help="Vector steps per measurement.")
    parser.add_argument(
        "--async-max", type=int, default=32, help="Largest N for AsyncVectorEnv (a process each)."
    )
    parser.add_argument("--base-url", default=None, help="Use a running server instead of the smoke model.")
    parser.add_argument("--model", default=None)
    parser.add_argument(
        "--no-prefix-caching",
        action="store_true",
        help="Serve without vLLM's prefix cache: every contender pays full prefill, so throughput compares "
        "fairly even when answers (and so later prompts) differ between runs. Skips the hit-rate table.",
    )
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        if args.base_url:
            server = {"base_url": args.base_url, "model": args.model}
        else:
            from dreamgym_env.serving import serve_smoke_model

            extra = ["--enable-prompt-tokens-details"] + (
                ["--no-enable-prefix-caching"] if args.no_prefix_caching else []
            )
            s = stack.enter_context(serve_smoke_model(extra_args=extra))
            server = {"base_url": s.base_url, "model": s.model}
            print(f"smoke model served in {s.startup_seconds:.1f}s at {s.base_url}\n")
        measure(make_envs(server, 4), 2)  # warm-up

        print(
            "Throughput in generated tokens/s (tr/s in brackets). The smoke model's answers vary in length with\n"
            "batch composition, so tokens/s is what compares server utilisation; tr/s depends on answer length.\n"
        )
        print(
            "| N | native | direct to server | of which waves of N | native / direct | SyncVectorEnv "
            "| native / Sync | AsyncVectorEnv | native / Async |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

        def cell(seconds: float, transitions: int, tokens: int) -> tuple[str, float]:
            return f"{tokens / seconds:.0f} ({transitions / seconds:.1f})", tokens / seconds

        for n in args.sizes:
            # One untimed pass first: every later run then finds the same prompts in vLLM's prefix cache,
            # so no contender is charged (or spared) the prefill the first run pays.
            measure(make_envs(server, n), args.steps)
            capture = Capturing(backend_for(server))
            t_native, count, tok_native = measure(make_envs(server, n, backend=capture), args.steps)
            native_cell, native = cell(t_native, count, tok_native)
            # The same requests (parse retries included) for the same transitions, with no env around them.
            # The limit is the better of two arrival patterns: continuous, and waves of N like the env's.
            continuous, waves = (
                cell(*_with_count(asyncio.run(fire_direct(server, capture.requests, n, bursts=b)), count))
                for b in (False, True)
            )
            direct_cell, direct = max(continuous, waves, key=lambda c: c[1])
            sync_cell, sync = cell(*measure(make_envs(server, n, "sync"), args.steps))
            async_cell, ratio_async = "n/a", "n/a"
            if n <= args.async_max:
                async_cell, async_rate = cell(*measure(make_envs(server, n, "async"), args.steps))
                ratio_async = f"{native / async_rate:.2f}"
            print(
                f"| {n} | {native_cell} | {direct_cell} | {waves[0]} | {native / direct:.2f} | {sync_cell} "
                f"| {native / sync:.2f} "
                f"| {async_cell} | {ratio_async} |",
                flush=True,
            )

        if not args.no_prefix_caching:
            ours = hit_rate(server, backend_for(server))
            naive = hit_rate(server, NaiveOrder(backend_for(server)))
            print("\n| prompt order | prefix-cache hit rate (tokens) |\n|---|---:|")
            print(
                f"| ours (fixed instructions, task, append-only history, then per-step parts) | {ours:.3f} |"
            )
            print(f"| naive (current state and action first) | {naive:.3f} |")

        n_mem = min(32, args.async_max)
        native_mem = native_memory_per_env(server, 128, args.steps)
        async_mem = async_memory_per_env(server, n_mem)
        print("\n| memory per sub-env | bytes |\n|---|---:|")
        print(f"| native vector env (N=128, after {args.steps} steps, Python heap) | {native_mem:,.0f} |")
        print(f"| AsyncVectorEnv (N={n_mem}, worker RSS) | {async_mem:,.0f} |")
        print(f"| ratio async / native | {async_mem / native_mem:.0f}x |")


if __name__ == "__main__":
    main()
