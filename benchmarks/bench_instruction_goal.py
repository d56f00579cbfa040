"""How well a TextWorld quest's instruction alone says when the game is won, on games no suite uses.

In the learned setting the simulator never sees a game's goal facts; ``TextWorldDomain.judge_step``
then reads the winning condition from the quest's instruction
(:mod:`dreamgym_env.domains.textworld.instruction`). This benchmark measures that judge on real games:
``--per-family`` games of each family of the game suite (custom, treasure hunter, coin collector,
tw-simple), drawn as ``benchmarks/bench_fidelity_settings.py`` draws them but from seeds at
``--first-seed`` (9,100,000) and up, and for each game the expert's walkthrough and ``--episodes - 1``
noisy-expert episodes in the real game. Every real transition is judged by the domain, as a task
without the game's goal facts, with the game's own result line hidden (a real ``You won.`` reads
``Done.``): the judge predicts a win exactly when the instruction's condition becomes true.

Per family: the share of instructions read (``parse_rate``), win recall and precision over every
real transition (a win in a game whose instruction was not read counts as missed), the same over
read games only, and the share of games whose expert winning step is judged a win. Writes one JSON
and prints a table.

    python benchmarks/bench_instruction_goal.py
    python benchmarks/bench_instruction_goal.py --per-family 5 --out /tmp/instruction_goal.json
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import ROOT, arg_parser, git_commit, write_json

warnings.filterwarnings("ignore")

from bench_fidelity_settings import FAMILIES, make_games  # noqa: E402

from dreamgym_env.domains import get_domain  # noqa: E402
from dreamgym_env.domains.textworld.facts import RESULT_CHANGED, RESULT_WON  # noqa: E402
from dreamgym_env.domains.textworld.instruction import instruction_goal  # noqa: E402
from dreamgym_env.domains.textworld.state import parse_state  # noqa: E402
from dreamgym_env.real.textworld import play_noisy_expert  # noqa: E402
from dreamgym_env.records import Step, Task, Transition  # noqa: E402

FIRST_SEED = 9_100_000
"""First seed of these games: above the suite's (0 + i, 1,000,000 + i) and the fidelity benchmark's."""
EXAMPLES = 8
"""Misjudged transitions and unread instructions kept per family in the result file."""


def without_win(state: str) -> str:
    """``state`` with a real ``You won.`` read as ``Done.``: the judge must not see the game's verdict."""
    parsed = parse_state(state)
    if parsed is None or parsed.result != RESULT_WON:
        return state
    parsed.result = RESULT_CHANGED
    return parsed.render()


def episodes_of(transitions: Sequence[Transition]) -> list[list[Transition]]:
    """The transitions grouped by episode, each in step order."""
    grouped: dict[str, list[Transition]] = defaultdict(list)
    for t in transitions:
        grouped[t.episode_id].append(t)
    return [sorted(steps, key=lambda t: t.step) for steps in grouped.values()]


def judged_wins(episode: Sequence[Transition]) -> list[bool]:
    """Whether the domain judges each step of a real episode a win, as a task without goal facts."""
    domain = get_domain("textworld")
    task = Task(task_id=episode[0].task_id, domain="textworld", instruction=episode[0].task)
    history: list[Step] = []
    out = []
    for t in episode:
        outcome = domain.judge_step(task, history, t.state, t.action, without_win(t.next_state))
        out.append(bool(outcome is not None and outcome.success))
        history.append(Step(state=t.state, action=t.action))
    return out


def ratio(part: int, whole: int) -> float | None:
    """``part / whole``, or ``None`` for an empty whole."""
    return round(part / whole, 4) if whole else None


def family_report(game_episodes: dict[str, list[list[Transition]]]) -> dict[str, Any]:
    """Parse rate, recall and precision, walkthroughs judged, and examples of what went wrong, for one family."""
    counts: dict[str, int] = defaultdict(int)
    misjudged: list[dict[str, Any]] = []
    unread: list[str] = []
    walkthroughs = [0, 0]  # expert episodes that win; of them, judged a win at the winning step
    for episodes in game_episodes.values():
        instruction = episodes[0][0].task
        read = instruction_goal(instruction) is not None
        counts["read"] += read
        if not read:
            unread.append(instruction)
        for number, episode in enumerate(episodes):
            for t, judged in zip(episode, judged_wins(episode), strict=True):
                real = bool(t.success)
                counts["wins"] += real
                counts["judged"] += judged
                counts["hits"] += real and judged
                if read:
                    counts["read_wins"] += real
                    counts["read_judged"] += judged
                if real != judged:
                    misjudged.append(_example(t, real, judged))
                if number == 0 and real:
                    walkthroughs[0] += 1
                    walkthroughs[1] += judged
            counts["transitions"] += len(episode)
    games = len(game_episodes)
    return {
        "games": games,
        "parse_rate": ratio(counts["read"], games),
        "transitions": counts["transitions"],
        "real_wins": counts["wins"],
        "judged_wins": counts["judged"],
        "recall": ratio(counts["hits"], counts["wins"]),
        "precision": ratio(counts["hits"], counts["judged"]),
        "recall_read_games": ratio(counts["hits"], counts["read_wins"]),
        "precision_read_games": ratio(counts["hits"], counts["read_judged"]),
        "walkthroughs_won": walkthroughs[0],
        "walkthrough_judged": ratio(walkthroughs[1], walkthroughs[0]),
        "misjudged": misjudged[:EXAMPLES],
        "misjudged_count": len(misjudged),
        "unread": unread[:EXAMPLES],
    }


def _example(t: Transition, real: bool, judged: bool) -> dict[str, Any]:
    goal = instruction_goal(t.task)
    return {
        "game": Path(str(t.metadata.get("game_file", ""))).name,
        "instruction_end": t.task[-160:],
        "goal": None if goal is None else vars(goal),
        "action": t.action,
        "next_state": t.next_state,
        "real_win": real,
        "judged_win": judged,
    }


def table(per_family: dict[str, dict[str, Any]]) -> str:
    """The figures as a small fixed-width table."""

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    head = f"{'family':<20}{'games':>6}{'parsed':>8}{'wins':>6}{'recall':>8}{'precis.':>8}{'walkthr.':>9}"
    rows = [
        f"{family:<20}{r['games']:>6}{cell(r['parse_rate']):>8}{r['real_wins']:>6}"
        f"{cell(r['recall']):>8}{cell(r['precision']):>8}{cell(r['walkthrough_judged']):>9}"
        for family, r in per_family.items()
    ]
    return "\n".join([head, *rows])


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--per-family", type=int, default=25)
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument(
        "--episodes", type=int, default=4, help="Real episodes per game: the expert's, then noisy ones."
    )
    parser.add_argument(
        "--epsilon", type=float, default=0.4, help="A noisy expert's share of random commands."
    )
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--games-dir", default=str(ROOT / "runs" / "instruction_goal_games"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "textworld_instruction_goal.json"))
    args = parser.parse_args()

    started, commit = time.perf_counter(), git_commit()
    games = make_games(Path(args.games_dir), args.per_family, args.first_seed)
    per_family: dict[str, dict[str, Any]] = {}
    index = 0
    for family in FAMILIES:
        game_episodes = {}
        for game in games[family]:
            real = play_noisy_expert(game, args.episodes, args.epsilon, args.max_steps, index)
            game_episodes[game] = episodes_of(real)
            index += 1
        per_family[family] = family_report(game_episodes)
        print(f"{family}: {per_family[family]['transitions']} transitions judged", flush=True)
    result = {
        "commit": commit,
        "first_seed": args.first_seed,
        "episodes": args.episodes,
        "epsilon": args.epsilon,
        "max_steps": args.max_steps,
        "games": {f: [Path(p).name for p in ps] for f, ps in games.items()},
        "families": per_family,
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(args.out, result)
    print(table(per_family))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
