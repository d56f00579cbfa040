"""What the benchmarks share: an argument parser, statistics over repeated runs, rows, result files.

One copy of each, so that a "median (min-max)" cell or a result file under ``docs/results/`` means the
same thing whichever benchmark wrote it. A benchmark runs as ``python benchmarks/<name>.py``, which
puts ``benchmarks/`` first on the import path: it imports this module, and the other ``_``-prefixed
modules beside it, with ``from _harness import ...``, and never imports another benchmark or a file of
``tests/``. Importing this module imports only the standard library, so a benchmark can still silence
warnings before it imports the package. It stays small: what one benchmark alone does stays there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from dreamgym_env.records import Transition

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


# ------------------------------------------------------------------------------------------ arguments
def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose ``--help`` shows the benchmark's docstring as written (its example commands)."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


# ----------------------------------------------------------------------------------------- statistics
def take_turns(repeats: int, contenders: dict[str, Callable[[], T]]) -> dict[str, list[T]]:
    """Each contender ``repeats`` times, the order rotating each repeat.

    A change of machine load during the run then hits every contender alike, and the i-th results of
    two contenders, measured side by side, can be divided into a ratio.
    """
    results: dict[str, list[T]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(contenders[name]())
    return results


def median_range(values: Sequence[float], *, count: bool = True) -> dict[str, float]:
    """``median``, ``min``, ``max`` and ``n`` of repeated runs of one measurement.

    The median, not the mean: one run slowed by another process on the machine should not move the
    figure. ``count=False`` leaves out ``n``, for result files whose committed copies have no such key.
    """
    out = {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values))}
    return {**out, "n": len(values)} if count else out


def mean_std(values: Sequence[float], *, count: bool = True) -> dict[str, float]:
    """``mean``, sample ``std`` (0 for one value), ``min``, ``max`` and ``n`` of per-seed figures.

    Each seed is a training run of its own and the question is how they do on average, so the mean,
    with the spread across seeds. ``count=False`` leaves out ``n``, as in :func:`median_range`.
    """
    out = {
        "mean": float(statistics.mean(values)),
        "std": float(statistics.stdev(values)) if len(values) > 1 else 0.0,
        "min": float(min(values)),
        "max": float(max(values)),
    }
    return {**out, "n": len(values)} if count else out


def format_range(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``median (min-max)`` of repeated runs, each number through ``fmt`` (a ``str.format`` pattern)."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


# ------------------------------------------------------------------------------------------------ rows
def transition(i: int) -> Transition:
    """A synthetic WebShop-like transition, distinct for every ``i``: rows for the buffer benchmarks."""
    from dreamgym_env.records import Transition  # here: importing the harness imports no package

    return Transition(
        domain="webshop",
        task_id="t",
        task="buy shoes",
        episode_id=f"e{i // 10}",
        step=i % 10,
        state=f"[results] item {i} shoes size {i % 13} color {i % 7} brand {i % 101}",
        action=f"click[item {i}]",
        next_state=f"[item] {i}",
        source="sim",
    )


# --------------------------------------------------------------------------------------------- results
def git_commit() -> str | None:
    """The short hash of the checked-out commit, the code a result was measured on; None outside git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def write_json(path: str | Path, payload: Any) -> None:
    """Write a result file as the committed ones under ``docs/results/`` are: indent 1, final newline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
