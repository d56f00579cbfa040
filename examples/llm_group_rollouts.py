"""GRPO-style group rollouts of a served language-model policy, exported for TRL.

Each round plays ``--group-size`` episodes of every task with the policy behind an OpenAI-compatible
endpoint, concurrently, and writes the trajectories (chat messages, rewards, group advantages) as a
``datasets.Dataset`` in TRL's prompt-completion format (``<out-dir>/round-<i>``). A trainer of your
choice updates the policy between rounds from those files; the success rate of each round is
plotted to ``<out-dir>/success_rate.png``.

    # real TextWorld games, policy served by vLLM (any chat model)
    python examples/llm_group_rollouts.py --base-url http://127.0.0.1:8000/v1 --model MODEL
    # CPU only: the tiny smoke model, built and served locally, is the policy (plumbing check, not skill)
    python examples/llm_group_rollouts.py --smoke
    # the simulator: the same endpoint also serves the experience model unless --env-base-url says otherwise
    python examples/llm_group_rollouts.py --smoke --env-id DreamGym/TextWorld-v0

The tasks come from generated TextWorld games (``tasks_from_games``), so the simulated and the real
ids start each episode from the same first state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.real.textworld import make_games, tasks_from_games
from dreamgym_env.training import ChatPolicy, collect_groups, to_trl_dataset


@dataclass
class Args:
    env_id: str = "DreamGym/TextWorld-Real-v0"
    games: int = 4
    challenge: str = "tw-coin_collector"
    level: int = 2
    group_size: int = 4
    rounds: int = 3
    max_steps: int = 8
    temperature: float = 1.0
    base_url: str | None = None
    model: str | None = None
    env_base_url: str | None = None  # simulated ids: experience-model endpoint (default: --base-url)
    env_model: str | None = None
    smoke: bool = False
    games_dir: str = "runs/textworld_games"
    out_dir: str = "runs/llm_group_rollouts"
    seed: int = 0


def env_kwargs(args: Args, games: list[str], base_url: str, model: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"max_steps": args.max_steps}
    if args.env_id.endswith("-Real-v0"):
        kwargs["game_files"] = games
    else:
        kwargs.update(base_url=args.env_base_url or base_url, model=args.env_model or model)
        if args.smoke:
            kwargs["on_invalid_output"] = "fail_state"  # the smoke model may answer badly; keep going
    return kwargs


def main(args: Args) -> list[dict[str, Any]]:
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        base_url, model = args.base_url, args.model
        if args.smoke:
            from dreamgym_env.serving import serve_smoke_model

            print("Serving the SMOKE MODEL (tiny, trained here in seconds): a plumbing check, not a skill.")
            server = stack.enter_context(serve_smoke_model())
            base_url, model = server.base_url, server.model
        if not base_url or not model:
            raise SystemExit("Give --base-url and --model (an OpenAI-compatible chat endpoint), or --smoke.")
        folder = Path(args.games_dir) / f"{args.challenge}-level{args.level}" / "rollouts"
        games = make_games(
            folder, args.games, seed=500, challenge=args.challenge, settings={"level": args.level}
        )
        tasks = tasks_from_games(games)
        policy = ChatPolicy(base_url, model, temperature=args.temperature, max_tokens=32)
        history = []
        for round_ in range(args.rounds):
            batch = collect_groups(
                args.env_id,
                tasks,
                policy,
                args.group_size,
                env_kwargs=env_kwargs(args, games, base_url, model),
                seed=args.seed + round_ * 10_000,
                progress=True,
            )
            dataset = to_trl_dataset(batch)
            dataset.save_to_disk(str(out / f"round-{round_}"))
            mixed = sum(v > 0 for v in batch.reward_variance().values())
            row = {
                "round": round_,
                "success_rate": batch.success_rate,
                "episodes": len(batch),
                "groups_with_signal": mixed,
                "mean_turns": sum(t.num_turns for t in batch.trajectories) / len(batch),
            }
            history.append(row)
            print(json.dumps(row))
        example = batch.trajectories[0]
        print("\nOne trajectory (reward", example.reward, "advantage", round(example.advantage, 3), "):")
        for message in example.messages[:5]:
            print(f"  [{message['role']}] {message['content'][:100]!r}")
    plot(history, out / "success_rate.png", args)
    (out / "history.json").write_text(json.dumps(history, indent=2))
    return history


def plot(history: list[dict[str, Any]], path: Path, args: Args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([h["round"] for h in history], [h["success_rate"] for h in history], marker="o")
    ax.set(xlabel="round", ylabel="success rate", ylim=(0, 1), title=f"group rollouts on {args.env_id}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot: {path}")


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(Args):
        flag = f"--{f.name.replace('_', '-')}"
        if f.type == "bool":
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(
                flag, type={"int": int, "float": float}.get(str(f.type), str), default=f.default
            )
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
