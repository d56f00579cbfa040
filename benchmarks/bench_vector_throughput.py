"""Transitions per second against one vLLM server: every way of driving it, against its limits.

Two workloads, one server, seeded tasks and the action ``look`` everywhere:

* **Fixed answers** (the comparison): every answer is the same text, pinned by the output schema
  (``pin_fixed_answers``, enforced by vLLM's structured decoding), and never ends an episode, so every
  contender sends the same requests and gets answers of the same token length. The table checks the
  tokens per transition that vLLM reports in ``usage``.
* **Real answers** (second table): what the model says (sampled), with its own lengths and episode
  ends; in generated tokens per second, since the contenders' answers differ.

Contenders, each size N:
  * ``direct, continuous``: the native env's very requests fired straight at the server, N in flight at
    all times (no env): the server's limit.
  * ``direct, waves of N``: the same requests in waves of N, each wave waiting for its slowest answer
    (the arrival pattern of any lock-step vector env, without the env): the lock-step limit.
  * ``native lock-step``: ``DreamGymVectorEnv``, held to the waves figure.
  * ``async runner``: ``rollout.aplay_episodes(lockstep=False)``, each episode advancing as soon as its
    own answer arrives, held to the continuous figure.
  * ``SyncVectorEnv``: Gymnasium's, one request at a time (fewer steps: it is slow; fixed answers only).
Then what autoreset costs (``NEXT_STEP`` idles a slot for one step after each episode end, against
``SAME_STEP``), what stragglers cost (waves of mixed answer lengths against equal ones, same mean), and
the prefix-cache hit rate of the prompt order.

Each figure is the median of ``--repeats`` runs with its min-max; contenders take turns within each
repeat, so a change of machine load hits all of them alike, and ratios are taken within a repeat.
Before each size, one untimed pass warms vLLM's prefix cache with the prompts every contender sends.
Without ``--base-url`` it builds and serves the smoke model on vLLM's CPU build (about a minute).

    python benchmarks/bench_vector_throughput.py --sizes 8 32 128 --steps 6 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
from _harness import arg_parser, format_range, take_turns
from _vllm_metrics import metrics_delta, read_metrics

import dreamgym_env
from dreamgym_env._event_loop import run_sync
from dreamgym_env.config import BackendConfig
from dreamgym_env.experience.backends import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.prompt import OUTPUT_INSTRUCTIONS
from dreamgym_env.experience.schema import fixed_answer_schema, pin_fixed_answers
from dreamgym_env.rollout import EpisodeJob, aplay_episodes

ENV_ID = "DreamGym/ALFWorld-v0"
ACTION = "look"
SAMPLING = dict(max_tokens=600, timeout=600.0)
#: Fixed answers decode greedily (there is one answer anyway). Real answers sample: greedy decoding of a
#: small model tends to loop until max_tokens, which would make every real answer the same length too.
REAL_TEMPERATURE = 0.7
CAPS = dict(
    caps_in_schema=True,  # real answers: the length caps bound them in decoding
    max_state_chars=240,
    max_reasoning_chars=120,
    max_admissible_actions=4,
    max_action_chars=40,
    on_invalid_output="fail_state",
    parse_retries=0,  # one request per transition, whatever the model answers
    **SAMPLING,
)


# ----------------------------------------------------------------------------------------- backends
class Counting(Backend):
    """Forwards to a real backend; counts answers and their tokens, keeps requests and wave marks."""

    def __init__(self, inner: Backend, keep: bool = False) -> None:
        self.inner = inner
        self.keep = keep
        self.requests: list[CompletionRequest] = []
        self.waves: list[int] = []  # len(self.requests) at the end of each vector step
        self.tokens: list[int] = []

    async def acomplete(self, request: CompletionRequest) -> Completion:
        if self.keep:
            self.requests.append(request)
        completion = await self.inner.acomplete(request)
        self.tokens.append(completion.completion_tokens or 0)
        return completion

    def mark(self) -> None:
        self.waves.append(len(self.requests))


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


@dataclass
class Server:
    base_url: str
    model: str

    def backend(self, fixed: int | None = None) -> OpenAIBackend:
        """The backend every contender uses: greedy for fixed answers, sampled for real ones."""
        temperature = 0.0 if fixed is not None else REAL_TEMPERATURE
        return OpenAIBackend(
            BackendConfig(
                base_url=self.base_url,
                model=self.model,
                max_concurrency=1024,
                temperature=temperature,
                **SAMPLING,
            )
        )


@dataclass
class Run:
    """One measurement: seconds, transitions (answers received) and their completion tokens."""

    seconds: float
    tokens: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.tokens) / self.seconds

    @property
    def token_rate(self) -> float:
        return sum(self.tokens) / self.seconds


# -------------------------------------------------------------------------------------- contenders
def pinned(envs: Any, fixed: int | None) -> Any:
    """``envs`` with every answer pinned to ``fixed`` characters (:func:`pin_fixed_answers`), if given."""
    if fixed is not None:
        pin_fixed_answers(envs, fixed)
    return envs


def env_kwargs(server: Server, fixed: int | None, steps: int, **more: Any) -> dict[str, Any]:
    return dict(
        base_url=server.base_url,
        model=server.model,
        max_steps=steps,  # no episode of the fixed workload ends before the last step
        **CAPS,
        **more,
    )


def native(server: Server, n: int, steps: int, fixed: int | None, *, keep: bool = False, **more: Any):
    """``steps`` lock-step vector steps of ``n`` sub-envs; also returns the counting backend."""
    counter = Counting(server.backend(fixed), keep=keep)
    envs = pinned(
        gym.make_vec(ENV_ID, num_envs=n, backend=counter, **env_kwargs(server, fixed, steps, **more)), fixed
    )
    try:
        envs.reset(seed=0)
        start = time.perf_counter()
        for _ in range(steps):
            envs.step([ACTION] * n)
            counter.mark()
        return Run(time.perf_counter() - start, counter.tokens), counter
    finally:
        envs.close()
        run_sync(counter.inner.aclose())  # on the loop the env's steps ran on


def sync_vector(server: Server, n: int, steps: int, fixed: int | None) -> Run:
    counter = Counting(server.backend(fixed))
    envs = pinned(
        gym.make_vec(
            ENV_ID, num_envs=n, vectorization_mode="sync", backend=counter, **env_kwargs(server, fixed, steps)
        ),
        fixed,
    )
    try:
        envs.reset(seed=0)
        start = time.perf_counter()
        for _ in range(steps):
            envs.step([ACTION] * n)
        return Run(time.perf_counter() - start, counter.tokens)
    finally:
        envs.close()
        run_sync(counter.inner.aclose())  # on the loop the env's steps ran on


def async_runner(server: Server, n: int, steps: int, fixed: int | None) -> Run:
    """``n`` episodes of ``steps`` (seeds as the native env's reset gives them), each at its own pace."""

    async def play() -> Run:
        counter = Counting(server.backend(fixed))
        envs = pinned(
            gym.make_vec(
                ENV_ID,
                num_envs=n,
                backend=counter,
                autoreset_mode=gym.vector.AutoresetMode.DISABLED,
                **env_kwargs(server, fixed, steps),
            ),
            fixed,
        ).unwrapped

        async def policy(k: int, obs: str, info: dict[str, Any]) -> str:
            return ACTION

        try:
            start = time.perf_counter()
            await aplay_episodes(envs, [EpisodeJob(seed=i) for i in range(n)], policy, lockstep=False)
            return Run(time.perf_counter() - start, counter.tokens)
        finally:
            await counter.inner.aclose()

    return run_sync(play())  # on the loop the envs' own steps run on, like every contender


def direct(
    server: Server,
    requests: Sequence[CompletionRequest],
    waves: Sequence[int],
    n: int,
    fixed: int | None,
    *,
    lockstep: bool,
) -> Run:
    """``requests`` straight at the server: ``n`` always in flight, or in the env's waves (``lockstep``).

    Through the same HTTP client the envs use (one connection kept alive per request in flight), with
    no env around it.
    """
    backend = server.backend(fixed)

    async def fire() -> Run:
        semaphore = asyncio.Semaphore(n)

        async def one(request: CompletionRequest) -> int:
            async with semaphore:
                return (await backend.acomplete(request)).completion_tokens or 0

        start = time.perf_counter()
        if lockstep:
            tokens: list[int] = []
            for lo, hi in zip([0, *waves[:-1]], waves, strict=True):
                tokens += await asyncio.gather(*(one(r) for r in requests[lo:hi]))
        else:
            tokens = list(await asyncio.gather(*(one(r) for r in requests)))
        elapsed = time.perf_counter() - start
        await backend.aclose()
        return Run(elapsed, tokens)

    return run_sync(fire())  # on the loop the envs' own steps run on, like every contender


# --------------------------------------------------------------------------------------- statistics
def rel_spread(values: Sequence[float]) -> float:
    """(max - min) / median: how far apart the repeats are."""
    return (max(values) - min(values)) / statistics.median(values)


def ratios(runs: dict[str, list[Run]], a: str, b: str, tokens: bool = False) -> list[float]:
    key = (lambda run: run.token_rate) if tokens else (lambda run: run.rate)
    return [key(x) / key(y) for x, y in zip(runs[a], runs[b], strict=True)]


# ------------------------------------------------------------------------------------------- tables
def measure_size(server: Server, n: int, args: argparse.Namespace, fixed: int | None) -> dict[str, list[Run]]:
    """Every contender at size ``n``, ``--repeats`` times, over at least ``--min-transitions`` each."""
    steps = max(args.steps, -(-args.min_transitions // n))
    # Untimed: warms the prefix cache, and records the requests the direct contenders replay.
    _, capture = native(server, n, steps, fixed, keep=True)
    contenders: dict[str, Callable[[], Run]] = {
        "continuous": lambda: direct(server, capture.requests, capture.waves, n, fixed, lockstep=False),
        "waves": lambda: direct(server, capture.requests, capture.waves, n, fixed, lockstep=True),
        "native": lambda: native(server, n, steps, fixed)[0],
        "async": lambda: async_runner(server, n, steps, fixed),
    }
    if n <= args.sync_max and fixed is not None:  # the fixed workload compares it; real answers skip it
        contenders["sync"] = lambda: sync_vector(server, n, args.sync_steps, fixed)
    return take_turns(args.repeats, contenders)


def size_table(
    server: Server, sizes: Sequence[int], args: argparse.Namespace, fixed: int | None
) -> list[list[float]]:
    """One row per N; returns each row's ratios (for the spread summary)."""
    tokens = fixed is None
    unit = "generated tokens/s" if tokens else "transitions/s"
    print(
        "| N | direct, continuous | direct, waves of N | native lock-step | native / waves "
        "| async runner | async / continuous | SyncVectorEnv | native / Sync | tokens per transition |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    all_ratios: list[list[float]] = []
    for n in sizes:
        runs = measure_size(server, n, args, fixed)

        def cell(name: str, runs: dict[str, list[Run]] = runs) -> str:
            rates = [r.token_rate if tokens else r.rate for r in runs[name]]
            return format_range(rates, "{:.0f}" if tokens else "{:.1f}")

        row = [ratios(runs, "native", "waves", tokens), ratios(runs, "async", "continuous", tokens)]
        sync_cells = ["n/a", "n/a"]
        if "sync" in runs:
            row.append(ratios(runs, "native", "sync", tokens))
            sync_cells = [cell("sync"), format_range(row[-1], "{:.1f}x")]
        per = [t for rs in runs.values() for r in rs for t in r.tokens]
        print(
            f"| {n} | {cell('continuous')} | {cell('waves')} | {cell('native')} | "
            f"{format_range(row[0], '{:.2f}')} | {cell('async')} | {format_range(row[1], '{:.2f}')} | "
            f"{sync_cells[0]} | {sync_cells[1]} | {min(per)}-{max(per)} |",
            flush=True,
        )
        all_ratios += row
    print(f"\nCells: {unit}, median (min-max) of {args.repeats} runs; ratios taken within each run.")
    return all_ratios


def autoreset_table(server: Server, n: int, args: argparse.Namespace) -> None:
    """Fixed answers, episodes of about ``--episode-steps``: NEXT_STEP spends a slot's step on each reset.

    Sub-env ``i`` truncates after ``length - 1 + i % 3`` steps, so episodes end at different steps, as
    they do in training: a NEXT_STEP vector step then carries some idle slots, and waits as long as a
    full one. (Were every episode to end together, the reset step would send nothing and cost nothing.)
    """
    length, steps = args.episode_steps, 3 * (args.episode_steps + 1)

    def mode(m: str) -> Callable[[], Run]:
        def run() -> Run:
            counter = Counting(server.backend(args.answer_chars))
            envs = pinned(
                gym.make_vec(
                    ENV_ID,
                    num_envs=n,
                    backend=counter,
                    autoreset_mode=m,
                    **env_kwargs(server, args.answer_chars, length),
                ),
                args.answer_chars,
            )
            try:
                for i, env in enumerate(envs.unwrapped.envs):
                    env.max_steps = max(1, length - 1 + i % 3)
                envs.reset(seed=0)
                start = time.perf_counter()
                for _ in range(steps):
                    envs.step([ACTION] * n)
                return Run(time.perf_counter() - start, counter.tokens)
            finally:
                envs.close()
                run_sync(counter.inner.aclose())  # on the loop the env's steps ran on

        return run

    # Warm-up: SAME_STEP plays the most episodes in the same steps (NEXT_STEP's are its first ones).
    mode("SameStep")()
    runs = take_turns(args.repeats, {"NEXT_STEP": mode("NextStep"), "SAME_STEP": mode("SameStep")})
    print(
        f"\n| autoreset (N={n}, episodes of {length - 1}-{length + 1} steps, {steps} vector steps) | transitions/s "
        f"| transitions |\n|---|---:|---:|"
    )
    for name, rs in runs.items():
        print(f"| {name} | {format_range([r.rate for r in rs], '{:.1f}')} | {len(rs[0].tokens)} |")
    print(f"| NEXT_STEP / SAME_STEP | {format_range(ratios(runs, 'NEXT_STEP', 'SAME_STEP'), '{:.2f}')} | |")


def straggler_table(server: Server, n: int, args: argparse.Namespace) -> None:
    """Direct waves and continuous, with equal answer lengths and with lengths spread around the same mean."""
    _, capture = native(server, n, args.steps, args.answer_chars, keep=True)
    chars = args.answer_chars
    mixed = [
        replace(r, json_schema=fixed_answer_schema(max(2, chars // 2 if i % 2 else chars * 3 // 2)))
        for i, r in enumerate(capture.requests)
    ]
    chars_ = args.answer_chars  # the prompts are in the prefix cache already: no second warm-up
    workloads = {"equal": capture.requests, "mixed": mixed}
    contenders = {
        f"{w} {p}": (
            lambda reqs=reqs, p=p: direct(server, reqs, capture.waves, n, chars_, lockstep=p == "waves")
        )
        for w, reqs in workloads.items()
        for p in ("waves", "continuous")
    }
    runs = take_turns(args.repeats, contenders)
    print(
        f"\n| stragglers (direct, N={n}) | answer chars | waves of N, tokens/s | continuous, tokens/s "
        f"| waves / continuous |\n|---|---|---:|---:|---:|"
    )
    for w, label in (("equal", f"all {chars}"), ("mixed", f"{chars // 2} or {chars * 3 // 2}")):
        lock = [r.token_rate for r in runs[f"{w} waves"]]
        cont = [r.token_rate for r in runs[f"{w} continuous"]]
        rel = [a / b for a, b in zip(lock, cont, strict=True)]
        print(
            f"| {w} | {label} | {format_range(lock, '{:.0f}')} | {format_range(cont, '{:.0f}')} "
            f"| {format_range(rel, '{:.2f}')} |"
        )


def hit_rate(server: Server, backend: Backend, episodes: int = 4, steps: int = 6) -> float:
    before = read_metrics(server.base_url)
    env = gym.make(ENV_ID, backend=backend, **{k: v for k, v in CAPS.items() if k != "timeout"})
    for seed in range(episodes):
        env.reset(seed=100 + seed)
        for _ in range(steps):
            *_, terminated, truncated, _ = env.step(ACTION)
            if terminated or truncated:  # the model may end an episode at any step: start the next
                env.reset()
    env.close()
    ran = metrics_delta(before, read_metrics(server.base_url))
    return ran["prefix_cache_hits"] / max(ran["prefix_cache_queries"], 1)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--steps", type=int, default=6, help="Vector steps (episode length) per measurement.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--min-transitions",
        type=int,
        default=128,
        help="Small N play more steps, so that every measurement spans at least this many transitions.",
    )
    parser.add_argument("--answer-chars", type=int, default=48, help="Length of the fixed answer's text.")
    parser.add_argument("--sync-max", type=int, default=32, help="Largest N for SyncVectorEnv.")
    parser.add_argument("--sync-steps", type=int, default=2, help="Vector steps for SyncVectorEnv.")
    parser.add_argument(
        "--real-sizes", type=int, nargs="*", default=[32], help="Sizes of the real-answer table."
    )
    parser.add_argument("--episode-steps", type=int, default=4, help="Episode length, autoreset table.")
    parser.add_argument("--detail-n", type=int, default=32, help="N of the autoreset and straggler tables.")
    parser.add_argument("--base-url", default=None, help="Use a running server instead of the smoke model.")
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.repeats < 1 or args.steps < 1:
        parser.error("--repeats and --steps must be at least 1")

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.base_url:
            if not args.model:
                parser.error("--base-url needs --model (the served model name)")
            server = Server(args.base_url, args.model)
        else:
            from dreamgym_env.serving import serve_smoke_model

            s = stack.enter_context(serve_smoke_model(extra_args=["--enable-prompt-tokens-details"]))
            server = Server(s.base_url, s.model)
            print(f"smoke model served in {s.startup_seconds:.1f}s at {s.base_url}\n")
        native(server, 4, 2, args.answer_chars)  # warm-up: connections, compiled graphs

        print(
            f"## Fixed answers ({args.answer_chars} characters, never done; episodes of {args.steps} "
            f"steps, more for small N to span {args.min_transitions} transitions; SyncVectorEnv "
            f"{args.sync_steps} steps)\n"
        )
        fixed_ratios = size_table(server, args.sizes, args, args.answer_chars)
        print(
            "Spread of each ratio over the runs, (max - min) / median: "
            + ", ".join(f"{rel_spread(r):.0%}" for r in fixed_ratios)
        )
        autoreset_table(server, args.detail_n, args)
        straggler_table(server, args.detail_n, args)
        if args.real_sizes:
            print(f"\n## Real answers (the model's own lengths and episode ends; {args.steps} steps)\n")
            size_table(server, args.real_sizes, args, None)
        ours, naive = hit_rate(server, server.backend()), hit_rate(server, NaiveOrder(server.backend()))
        print("\n| prompt order (real answers) | prefix-cache hit rate (tokens) |\n|---|---:|")
        print(f"| ours (fixed instructions, task, append-only history, then per-step parts) | {ours:.3f} |")
        print(f"| naive (current state and action first) | {naive:.3f} |")
    print(f"\n(total {time.perf_counter() - started:.0f}s)")


if __name__ == "__main__":
    main()
