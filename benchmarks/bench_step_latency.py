"""One env.step() against the real vLLM server: latency, and the share spent outside the server.

Starts the smoke model on vLLM's CPU build (or uses ``--base-url``), plays ALFWorld episodes one step
at a time, and splits each step into the server round trip (``info["timing"]["model_s"]``) and
everything else (prompt building, retrieval, parsing, bookkeeping, the event-loop hop).

Only steps the model answered in one attempt are split; a step whose first answers were unusable
(``info["attempts"] > 1``, retried) is mostly extra round trips (``model_s`` adds them all up), so
those steps are counted on their own line.

    python benchmarks/bench_step_latency.py [--steps 60] [--fixed-answer-chars 48] [--base-url URL --model NAME]

``--fixed-answer-chars L`` makes the output schema admit one answer of ``L`` filler characters (the
controlled workload of ``bench_vector_throughput.py``), so every step is answered in one attempt.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import gymnasium as gym
from _harness import arg_parser

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.experience.schema import pin_fixed_answers

CAPS = dict(
    max_state_chars=300,
    max_reasoning_chars=160,
    max_admissible_actions=6,
    max_action_chars=40,
    max_tokens=900,
    on_invalid_output="fail_state",
    max_steps=20,
)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument(
        "--fixed-answer-chars",
        type=int,
        default=None,
        help="answers of exactly this many filler characters (default: the model's own answers)",
    )
    args = parser.parse_args()
    caps = dict(CAPS)
    with contextlib.ExitStack() as stack:
        startup = None
        if args.base_url:
            base_url, model = args.base_url, args.model
        else:
            from dreamgym_env.serving import serve_smoke_model

            server = stack.enter_context(serve_smoke_model())
            base_url, model, startup = server.base_url, server.model, server.startup_seconds
        env = gym.make("DreamGym/ALFWorld-v0", base_url=base_url, model=model, **caps)
        if args.fixed_answer_chars is not None:
            pin_fixed_answers(env, args.fixed_answer_chars)
        obs, info = env.reset(seed=0)
        env.step("look")  # warm-up
        total, model_s, outside, retried, attempts = [], [], [], [], []
        for i in range(args.steps):
            start = time.perf_counter()
            obs, _, terminated, truncated, info = env.step("look" if i % 2 else "inventory")
            wall = time.perf_counter() - start
            attempts.append(int(info["attempts"]))
            if info["attempts"] > 1:
                retried.append(wall)
            else:
                total.append(wall)
                model_s.append(info["timing"]["model_s"])
                outside.append(wall - info["timing"]["model_s"])
            if terminated or truncated:
                obs, info = env.reset()
        med = statistics.median
        print("| measure | value |\n|---|---:|")
        if startup is not None:
            print(f"| vLLM server start (smoke model, CPU build) | {startup:.1f} s |")
        print(f"| steps answered in one attempt / measured | {len(total)} / {args.steps} |")
        if total:
            print(f"| env.step() median (one attempt) | {med(total) * 1000:.1f} ms |")
            print(f"| server round trip median | {med(model_s) * 1000:.1f} ms |")
            print(
                f"| outside the server median (prompt, parse, bookkeeping, loop hop) | {med(outside) * 1000:.2f} ms |"
            )
            print(
                f"| share outside the server (median of per-step ratios) | "
                f"{med(o / t for o, t in zip(outside, total, strict=True)) * 100:.2f} % |"
            )
        if retried:
            print(
                f"| env.step() median of retried steps ({len(retried)}, up to {max(attempts)} attempts) | "
                f"{med(retried) * 1000:.1f} ms |"
            )


if __name__ == "__main__":
    main()
