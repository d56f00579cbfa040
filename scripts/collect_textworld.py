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

import numpy as np

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.real.textworld import TextWorldRealEnv, make_games
from dreamgym_env.types import Transition


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


def play(
    game: str, episodes: int, epsilon: float, max_steps: int, seed: int, split: str | None = None
) -> list[Transition]:
    """Every transition of ``episodes`` episodes of one game (the first one by the expert)."""
    env = TextWorldRealEnv([game], max_steps=max_steps)
    rng = np.random.default_rng(seed)
    out: list[Transition] = []
    try:
        for episode in range(episodes):
            state, info = env.reset(seed=seed * 1000 + episode, options={"game_file": game})
            task = env.task
            assert task is not None
            eps = 0.0 if episode == 0 else epsilon
            policy = "expert" if eps == 0 else f"expert+random({eps})"
            for _ in range(max_steps):
                admissible = list(info["admissible_actions"])
                plan = list(info.get("expert_plan") or [])
                if plan and rng.random() >= eps:
                    action = plan[0]
                else:
                    action = str(rng.choice(admissible)) if admissible else "look"
                _, reward, terminated, truncated, info = env.step(action)
                out.append(
                    Transition(
                        domain="textworld",
                        task_id=task.task_id,
                        task=task.instruction,
                        episode_id=info["episode_id"],
                        step=int(info["step"]) - 1,
                        state=state,
                        action=action,
                        next_state=env.state,
                        reward=reward,
                        done=terminated,
                        success=bool(info["success"]),
                        source="real",
                        metadata={
                            "task_metadata": {},
                            "admissible_actions": list(info["admissible_actions"]),
                            "prev_admissible_actions": admissible,
                            "policy": policy,
                            "game_file": game,
                            **({"suite_split": split} if split else {}),
                        },
                    )
                )
                state = env.state
                if terminated or truncated:
                    break
    finally:
        env.close()
    return out


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
        heldout = sorted(f"textworld-{Path(p).stem}" for p in suite.paths("heldout"))
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
            play,
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
