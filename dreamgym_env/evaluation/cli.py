"""``dreamgym eval-fidelity``: score a served experience model and baselines on held-out real transitions."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import replace
from typing import Any


def _cmd_eval_fidelity(args: argparse.Namespace) -> int:
    from dreamgym_env.config import BackendConfig, EnvConfig
    from dreamgym_env.evaluation.report import write_run
    from dreamgym_env.evaluation.runner import BASELINES, evaluate, load_eval_cases, model_predictor
    from dreamgym_env.experience.backends.openai_http import OpenAIBackend

    if bool(args.games) == bool(args.data):
        print(
            "Give exactly one of --data (an SFT split, with --buffer) and --games (a folder of game files)."
        )
        return 2
    if args.games:
        cases, config = _cases_from_games(args)
        where = f"real games in {args.games}"
    else:
        if not args.buffer:
            print("--data needs --buffer, the replay buffer the SFT data was built from.")
            return 2
        cases, config = load_eval_cases(
            args.buffer, args.data, limit=args.limit, seed=args.seed, split=args.split, setting=args.setting
        )
        where = f"held-out split {args.split!r}"
    if args.answer_format:
        config = replace(config, answer_format=args.answer_format)
    print(
        f"{len(cases)} transitions from {len({c.task.task_id for c in cases})} tasks ({where}), "
        f"{config.setting} setting",
        flush=True,
    )
    runs: list[tuple[str, Any, Any]] = [(name, BASELINES[name], None) for name in args.baseline]
    if args.model:
        backend = OpenAIBackend(
            BackendConfig(
                base_url=args.base_url,
                model=args.model,
                temperature=0.0,
                max_tokens=args.max_tokens,
                max_concurrency=args.concurrency,
                timeout=args.timeout,
            )
        )
        env_config = EnvConfig(
            parse_retries=0,
            max_state_chars=args.max_state_chars,
            max_reasoning_chars=args.max_reasoning_chars,
            max_action_chars=args.max_action_chars,
            replay_real=not args.no_replay,
            guided_answers=args.guided_answers,
        )
        runs.append((args.name or args.model, model_predictor(backend, config, env_config), backend))
    if not runs:
        print("Nothing to evaluate: give --model (with --base-url) and/or --baseline NAME.")
        return 2
    for name, predictor, backend in runs:
        started = time.monotonic()
        work = evaluate(name, predictor, cases, concurrency=args.concurrency, setting=config.setting)
        report, records = asyncio.run(work if backend is None else backend.closing(work))
        extra = ""
        if args.judge_model:
            from dreamgym_env.evaluation.judge import judge_records

            judge = OpenAIBackend(
                BackendConfig(
                    base_url=args.judge_base_url, model=args.judge_model, temperature=0.0, max_tokens=64
                )
            )
            tasks = {c.task.task_id: c.task.instruction for c in cases}
            rubric = asyncio.run(judge.closing(judge_records(judge, records, tasks)))
            extra = f" judge={json.dumps(rubric)}"
        path = write_run(args.out, report, records)
        print(
            f"{name}: {json.dumps(report.as_dict())}{extra} ({time.monotonic() - started:.1f}s) -> {path}",
            flush=True,
        )
    print((args.out.rstrip("/") + "/fidelity.md"), flush=True)
    return 0


def _cases_from_games(args: argparse.Namespace) -> tuple[list[Any], Any]:
    import random

    from dreamgym_env.evaluation.games import cases_from_games, find_games
    from dreamgym_env.shipped_settings import answer_format, prompt_settings, prompt_style
    from dreamgym_env.training.sft_data import SFTBuildConfig

    window, top_k = prompt_settings(args.model)
    config = SFTBuildConfig(
        domain="textworld",
        history_window=window if args.history_window is None else args.history_window,
        top_k=top_k if args.top_k is None else args.top_k,
        prompt_style=args.prompt_style or prompt_style(args.model),
        answer_format=answer_format(args.model),
        setting=args.setting or "privileged",
    )
    cases = cases_from_games(
        find_games(args.games),
        config,
        buffer_path=args.buffer,
        episodes=args.episodes,
        epsilon=args.epsilon,
        max_steps=args.max_steps,
        seed=args.seed,
    )
    if args.limit is not None and len(cases) > args.limit:
        cases = random.Random(args.seed).sample(cases, args.limit)
    return cases, config


def add_evaluation_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``eval-fidelity`` to the ``dreamgym`` command."""
    p = commands.add_parser(
        "eval-fidelity",
        help="Replay held-out real transitions through a served experience model and baselines.",
        description="Score next-state, done/success, admissible-action agreement and parse failures on the "
        "held-out tasks of an SFT split (`dreamgym build-sft`), or on real TextWorld games played now "
        "(--games DIR). Writes NAME.fidelity.json, "
        "NAME.predictions.jsonl, fidelity.md and fidelity.png into --out.",
    )
    p.add_argument(
        "--buffer",
        help="With --data: the replay buffer the SFT data was built from. With --games: the buffer the "
        "simulator retrieves demonstrations from (as the env would).",
    )
    p.add_argument("--data", help="SFT data folder (its manifest names the held-out tasks).")
    p.add_argument(
        "--games",
        help="A folder of real TextWorld game files (.z8/.ulx) to play now, instead of --data: each real "
        "transition is asked of the simulator with the same history and retrieval.",
    )
    p.add_argument("--episodes", type=int, default=2, help="With --games: episodes per game (expert first).")
    p.add_argument("--epsilon", type=float, default=0.4, help="With --games: noisy expert's random share.")
    p.add_argument("--max-steps", type=int, default=30, help="With --games: steps per episode.")
    p.add_argument(
        "--history-window",
        type=int,
        help="With --games: history steps in each prompt (default: the shipped model's setting, else 1).",
    )
    p.add_argument("--top-k", type=int, help="With --games: demonstrations per prompt (default as above).")
    p.add_argument(
        "--prompt-style",
        choices=["full", "compact"],
        help="With --games: the prompt style the model was trained on (default: the shipped model's, else full).",
    )
    p.add_argument(
        "--answer-format",
        choices=["json", "state"],
        help="What the model answers (EnvConfig.answer_format; default: the SFT data's with --data, the "
        "shipped model's with --games, else json).",
    )
    p.add_argument(
        "--setting",
        choices=["learned", "privileged"],
        help="What the simulator may see (EnvConfig.setting): 'learned' gives the model no hidden fact of "
        "the game (layout, contents, goal), demonstrations of other games only and no replay; "
        "'privileged' gives it the game's facts. Default: the SFT data's with --data, privileged with --games.",
    )
    p.add_argument("--out", required=True, help="Results folder (shared by successive runs).")
    p.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="The served model's endpoint.")
    p.add_argument("--model", help="Served model name (omit to run baselines only).")
    p.add_argument("--name", help="Row name in the table (default: the model name).")
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        choices=["repeat-state", "nearest-transition"],
        help="Also score a model-free baseline (repeatable).",
    )
    p.add_argument(
        "--split",
        default="eval",
        choices=["eval", "eval_episodes"],
        help="Held-out tasks (eval) or held-out episodes of training tasks (eval_episodes).",
    )
    p.add_argument(
        "--no-replay",
        action="store_true",
        help="Ask the model even where a demonstration is a real transition of the very step (EnvConfig.replay_real).",
    )
    p.add_argument(
        "--guided-answers",
        action="store_true",
        help="Decode the model's answer as a choice among the outcomes the domain writes out, and a "
        "revealing answer in the form it gives (EnvConfig.guided_answers; plain-state answers, vLLM's server).",
    )
    p.add_argument("--limit", type=int, help="Score a seeded sample of at most this many transitions.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--max-state-chars", type=int, default=1200, help="Cap on a predicted state (schema).")
    p.add_argument("--max-reasoning-chars", type=int, default=400, help="Cap on the reasoning (schema).")
    p.add_argument(
        "--max-action-chars", type=int, default=100, help="Cap on each admissible action (schema)."
    )
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--judge-base-url", default="http://127.0.0.1:8001/v1", help="Judge endpoint (rubrics).")
    p.add_argument("--judge-model", help="Also score the four judge rubrics with this served model.")
    p.set_defaults(func=_cmd_eval_fidelity)
