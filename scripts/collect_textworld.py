"""Collect real TextWorld transitions into a replay buffer: expert and noisy-expert policies, generated games.

Usage:
    python scripts/collect_textworld.py --suite runs/suite --train-games 256 --heldout-games 40 \
        --episodes 4 --out runs/em/buffer.sqlite
    python scripts/collect_textworld.py --games 40 --challenge tw-simple --out runs/em/buffer.sqlite

With ``--suite`` the games are the benchmark suite of :mod:`dreamgym_env.real.textworld_suite` (built
there, or reused), every transition's metadata names its game's split (``suite_split``), and the task
ids of the held-out games are written to ``heldout_tasks.txt`` beside the buffer, for
``dreamgym build-sft --heldout-tasks``. Without it, ``--games`` games of one ``--challenge`` are made.

Each game gets one expert episode (its walkthrough) and ``--episodes - 1`` episodes in which every
action is, with probability ``--epsilon``, a random admissible command instead of the walkthrough's
next one (so the data holds refusals, detours and losses, not only winning lines). Transitions are
stored with ``dedup="episode"`` (every step of every episode, as SFT histories need) and carry in
``metadata`` the task's facts and the admissible commands before and after the step.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.domains.textworld import textworld_task_id
from dreamgym_env.real.textworld import make_games, play_noisy_expert


@dataclass
class Args:
    """Command-line arguments (each field is a ``--flag``)."""

    games: int = 40
    episodes: int = 4
    epsilon: float = 0.4
    max_steps: int = 30
    seed: int = 0
    challenge: str = "tw-simple"
    workers: int = 2
    out: str = "runs/experience_model/buffer.sqlite"
    games_dir: str | None = None
    suite: str | None = None
    train_games: int = 256
    heldout_games: int = 40


def main() -> None:
    """Generate games, play them in worker processes, store every transition."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name, default in vars(Args()).items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=type(default) if default is not None else str, default=default
        )
    args = Args(**vars(parser.parse_args()))
    started = time.monotonic()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    splits: list[str | None]
    if args.suite:
        from dreamgym_env.real.textworld_suite import build_suite

        suite = build_suite(
            args.suite,
            train_games=args.train_games,
            heldout_games=args.heldout_games,
            seed=args.seed,
            workers=args.workers,
        )
        games = [g.path for g in suite.games]
        splits = [g.split for g in suite.games]
        heldout = sorted(textworld_task_id(p) for p in suite.paths("heldout"))
        (out.parent / "heldout_tasks.txt").write_text("\n".join(heldout) + "\n", encoding="utf-8")
    else:
        games_dir = Path(args.games_dir or out.parent / "games")
        chunks = [list(range(i, args.games, args.workers)) for i in range(args.workers)]
        with ProcessPoolExecutor(args.workers) as pool:
            made = pool.map(_make_some, [(str(games_dir), args.seed, c, args.challenge) for c in chunks])
            games = sorted(g for batch in made for g in batch)
        splits = [None] * len(games)
    print(f"generated {len(games)} games in {time.monotonic() - started:.0f}s", flush=True)
    with ProcessPoolExecutor(args.workers) as pool:
        results = pool.map(
            play_noisy_expert,
            games,
            [args.episodes] * len(games),
            [args.epsilon] * len(games),
            [args.max_steps] * len(games),
            range(args.seed, args.seed + len(games)),
            splits,
            chunksize=4,
        )
        transitions = [t for batch in results for t in batch]
    with ReplayBuffer.open(out, dedup="episode") as buffer:
        result = buffer.add_many(transitions)
    wins = sum(t.success for t in transitions)
    print(
        f"collected {len(transitions)} transitions ({result.stored} new, {wins} winning steps) from "
        f"{len(games)} games into {out} in {time.monotonic() - started:.0f}s",
        flush=True,
    )


def _make_some(job: tuple[str, int, list[int], str]) -> list[str]:
    games_dir, seed, indices, challenge = job
    paths = []
    for i in indices:
        paths += make_games(games_dir, 1, seed=seed + i, challenge=challenge)
    return paths


if __name__ == "__main__":
    main()
