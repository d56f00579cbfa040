"""Where a simulated TextWorld step's time goes, at 1, 8, 32 and 64 envs: the client and the server.

Plays the workload of ``bench_sim_speed.py`` (suite games, random admissible commands, the shipped
model on vLLM's OpenAI server) with a concurrent vector env of each size, ``--repeats`` times, and
splits the time:

  * client: this process's CPU time per transition (prompt building, retrieval, HTTP, parsing, the
    domain's rules), and per model-answered step the env's own timings (``info["timing"]``: build,
    retrieval, parse, and the round trip as the client saw it);
  * server: vLLM's ``/metrics`` before and after each run (queue, prefill and decode time per request,
    prompt tokens computed and served from the prefix cache, generated tokens, engine iterations);
  * structured output: the cost of xgrammar's token mask per generated token, measured apart on the
    model's own tokenizer and schema, walking real answers token by token (fill the mask, apply it to
    a logits row of the vocabulary's size, accept the token), since vLLM reports no figure for it.

Median (min-max) over the repeats; ``--out`` writes the JSON.

    python benchmarks/bench_sim_breakdown.py --sizes 1 8 32 64 --transitions 256 --repeats 3 \
        --out docs/results/sim_breakdown.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import warnings
from typing import Any

from _harness import arg_parser, format_range, git_commit, median_range, write_json

warnings.filterwarnings("ignore")

from _textworld_sim import add_workload_args, play_sim, workload  # noqa: E402 - imports the package
from _vllm_metrics import metrics_delta, read_metrics  # noqa: E402


def one_run(work: Any, envs: int, steps: int, seed: int) -> dict[str, float]:
    """One timed run of ``envs`` sub-envs for ``steps`` vector steps, client and server side."""
    before = read_metrics(work.sim_kwargs["base_url"])
    run = play_sim(work, envs, steps, seed)
    server = metrics_delta(before, read_metrics(work.sim_kwargs["base_url"]))
    asked = [i for i in run.infos if i["answered_by"] == "model"]
    requests = max(server["requests"], 1.0)

    def per_asked(key: str) -> float:
        return 1000 * statistics.fmean(i["timing"][key] for i in asked) if asked else 0.0

    decoded = max(server["generation_tokens"] - server["requests"], 1.0)  # the first token is prefill's
    return {
        "steps_per_s": run.steps / run.seconds,
        "vector_step_s": run.seconds / steps,
        "asked_share": len(asked) / max(len(run.infos), 1),
        "client_cpu_ms_per_transition": 1000 * run.cpu_seconds / run.steps,
        "client_cpu_ms_per_request": 1000 * run.cpu_seconds / requests,
        "build_ms": per_asked("build_s"),
        "retrieve_ms": per_asked("retrieve_s"),
        "parse_ms": per_asked("parse_s"),
        "round_trip_ms": per_asked("model_s"),
        "requests": server["requests"],
        "server_e2e_ms": 1000 * server["e2e_s"] / requests,
        "queue_ms": 1000 * server["queue_s"] / requests,
        "prefill_ms": 1000 * server["prefill_s"] / requests,
        "decode_ms": 1000 * server["decode_s"] / requests,
        "prompt_tokens": server["prompt_tokens"] / requests,
        "prefix_hit_rate": server["prefix_cache_hits"] / max(server["prefix_cache_queries"], 1.0),
        "generated_tokens": server["generation_tokens"] / requests,
        "decode_ms_per_token": 1000 * server["decode_s"] / decoded,
        "iterations": server["iterations"],
        # how many answers an engine iteration advances: the decode batch the envs' requests form
        "answers_per_iteration": server["generation_tokens"] / max(server["iterations"], 1.0),
    }


def mask_cost(work: Any, answers: int = 64) -> dict[str, float] | None:
    """Microseconds of xgrammar's mask per generated token, on real answers of the offline data.

    ``None`` where the env sends no schema (plain-text state answers: no grammar, no mask).
    """
    import gymnasium as gym
    import torch
    import xgrammar as xgr
    from transformers import AutoTokenizer

    from dreamgym_env.real.textworld import tasks_from_games
    from dreamgym_env.serving.shipped import shipped_model_dir
    from dreamgym_env.training.sft_data import target_output

    env = gym.make("DreamGym/TextWorld-v0", tasks=tasks_from_games(work.games), **work.sim_kwargs).unwrapped
    schema, domain = env.experience_model.json_schema, env.domain  # type: ignore[attr-defined]
    env.close()
    if schema is None:
        return None
    tokenizer = AutoTokenizer.from_pretrained(shipped_model_dir("textworld"))
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
    started = time.perf_counter()
    grammar = xgr.GrammarCompiler(info).compile_json_schema(schema, any_whitespace=False)
    compile_s = time.perf_counter() - started
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    logits = torch.zeros(1, info.vocab_size)
    tokens, seconds = 0, 0.0
    for transition in work.offline[:answers] if work.offline else []:
        # vLLM's compact JSON (xgrammar without free whitespace) keeps json.dumps' separators.
        text = json.dumps(target_output(transition, domain).model_dump())
        matcher = xgr.GrammarMatcher(grammar)
        for token in tokenizer.encode(text, add_special_tokens=False):
            began = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            xgr.apply_token_bitmask_inplace(logits, bitmask)
            seconds += time.perf_counter() - began
            tokens += 1
            if not matcher.accept_token(token):
                break  # the tokenizer split the text otherwise than the model would: stop this answer
    return {
        "us_per_token": 1e6 * seconds / max(tokens, 1),
        "tokens": tokens,
        "compile_ms": 1000 * compile_s,
    }


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument(
        "--transitions", type=int, default=256, help="Transitions per run: small sizes play more steps."
    )
    parser.add_argument("--max-steps", type=int, default=9, help="Episode length before truncation.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="Write the result as JSON here.")
    add_workload_args(parser)
    args = parser.parse_args()

    rows: dict[str, Any] = {}
    with workload(args, args.max_steps) as work:
        play_sim(work, max(args.sizes), 1, args.seed)  # warm-up: compile, caches
        masks = mask_cost(work)
        for envs in args.sizes:
            steps = math.ceil(args.transitions / envs)
            runs = [one_run(work, envs, steps, args.seed + 1000 * r) for r in range(args.repeats)]
            rows[str(envs)] = {key: median_range([r[key] for r in runs]) for key in runs[0]}
            print(
                f"N={envs}: {format_range([r['steps_per_s'] for r in runs], '{:.2f}')} steps/s, "
                f"client CPU {format_range([r['client_cpu_ms_per_transition'] for r in runs])} ms/transition, "
                f"prefill {format_range([r['prefill_ms'] for r in runs], '{:.0f}')} ms, "
                f"decode {format_range([r['decode_ms'] for r in runs], '{:.0f}')} ms a request",
                flush=True,
            )
    result = {
        "sizes": rows,
        "structured_output_mask": masks,
        "transitions_per_run": args.transitions,
        "repeats": args.repeats,
        "games": args.games,
        "memo": not args.no_memo,
        "setting": work.sim_kwargs.get("setting", "privileged"),
        "commit": git_commit(),
        "server_args": args.server_arg,
        "server_env": args.server_env,
        "env_args": args.env_arg,
    }
    print_table(rows, masks)
    if args.out:
        write_json(args.out, result)


def print_table(rows: dict[str, Any], masks: dict[str, float] | None) -> None:
    """The breakdown as a markdown table, medians of the repeats."""
    columns = [
        ("steps/s", "steps_per_s", "{:.2f}"),
        ("asked", "asked_share", "{:.2f}"),
        ("client CPU ms/transition", "client_cpu_ms_per_transition", "{:.2f}"),
        ("build ms", "build_ms", "{:.2f}"),
        ("retrieve ms", "retrieve_ms", "{:.2f}"),
        ("parse ms", "parse_ms", "{:.2f}"),
        ("round trip ms", "round_trip_ms", "{:.0f}"),
        ("server e2e ms", "server_e2e_ms", "{:.0f}"),
        ("queue ms", "queue_ms", "{:.0f}"),
        ("prefill ms", "prefill_ms", "{:.0f}"),
        ("decode ms", "decode_ms", "{:.0f}"),
        ("prompt tokens", "prompt_tokens", "{:.0f}"),
        ("prefix hits", "prefix_hit_rate", "{:.2f}"),
        ("generated", "generated_tokens", "{:.0f}"),
        ("decode ms/token", "decode_ms_per_token", "{:.0f}"),
        ("answers advanced/iteration", "answers_per_iteration", "{:.1f}"),
    ]
    print("\n| N | " + " | ".join(c[0] for c in columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for envs, row in rows.items():
        print(f"| {envs} | " + " | ".join(fmt.format(row[key]["median"]) for _, key, fmt in columns) + " |")
    if masks is None:
        print("\nstructured output: none (plain-text answers, no grammar)")
        return
    print(
        f"\nstructured output (xgrammar): {masks['us_per_token']:.0f} us a generated token "
        f"({masks['tokens']} tokens), schema compiled in {masks['compile_ms']:.0f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
