"""What a user reads about the curriculum: pool growth, the variance distribution, success by family.

:func:`build_report` reads everything from the pool (so it works on a finished or running training
run's file), :func:`format_report` prints it as markdown and :func:`plot_report` draws it with
matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dreamgym_env.curriculum.pool import TaskPool
from dreamgym_env.curriculum.stats import compute_task_stats
from dreamgym_env.errors import DependencyNotInstalled

_VARIANCE_BINS: tuple[float, ...] = (0.0, 1e-9, 0.05, 0.1, 0.15, 0.2, 0.25 + 1e-9)
"""Histogram edges of V: exactly 0 (no advantage signal), then steps up to 0.25, the binary maximum."""


@dataclass(frozen=True)
class FamilyStats:
    """Outcomes of one task family (see :func:`~dreamgym_env.curriculum.pool.task_family`)."""

    family: str
    tasks: int
    generated: int
    episodes: int
    success_rate: float
    mean_variance: float


@dataclass
class CurriculumReport:
    """A snapshot of the pool.

    Attributes:
        path: The pool's file.
        domain: The domain reported on (``None``: all).
        n: Outcomes per task the variances use.
        tasks: Tasks per origin (``seed``, ``generated``, ``external``).
        episodes: Outcomes recorded.
        growth: ``(episodes recorded, seed tasks, generated tasks)`` at every change of the pool.
        variances: V of every task with an outcome, over its own latest ``n``.
        variance_histogram: Task counts in :data:`_VARIANCE_BINS`.
        families: Per family, sorted by name.
        rejections: Rejected candidates per stage.
    """

    path: str
    domain: str | None
    n: int
    tasks: dict[str, int]
    episodes: int
    growth: list[tuple[int, int, int]]
    variances: list[float]
    variance_histogram: list[int]
    families: list[FamilyStats]
    rejections: dict[str, int] = field(default_factory=dict)

    @property
    def pool_size(self) -> int:
        """Seed plus generated tasks."""
        return self.tasks.get("seed", 0) + self.tasks.get("generated", 0)

    @property
    def mixed_fraction(self) -> float:
        """Fraction of tasks with outcomes whose V is above zero (non-zero advantage)."""
        return float(np.mean([v > 0 for v in self.variances])) if self.variances else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        data.update(pool_size=self.pool_size, mixed_fraction=self.mixed_fraction)
        return data


def build_report(pool: TaskPool, *, domain: str | None = None, n: int = 8) -> CurriculumReport:
    """Read the pool's tasks and outcomes into a :class:`CurriculumReport`."""
    entries = pool.tasks(domain=domain)
    history = pool.recent_outcomes(n, domain=domain)
    stats = compute_task_stats([e.task_id for e in entries], history, n=n)
    episodes_by_task = Counter(o.task_id for o in pool.outcomes())
    successes_by_task = Counter(o.task_id for o in pool.outcomes() if o.success)

    growth: list[tuple[int, int, int]] = []
    seeds = generated = 0
    for e in entries:
        seeds += e.origin == "seed"
        generated += e.origin == "generated"
        point = (e.created_episode, seeds, generated)
        if growth and growth[-1][0] == e.created_episode:
            growth[-1] = point
        else:
            growth.append(point)
    total_episodes = sum(episodes_by_task[e.task_id] for e in entries)
    if growth and growth[-1][0] < pool.episode_count():
        growth.append((pool.episode_count(), seeds, generated))

    variances = [stats[e.task_id].variance for e in entries if stats[e.task_id].explored]
    histogram = (
        np.histogram(variances, bins=_VARIANCE_BINS)[0].tolist()
        if variances
        else [0] * (len(_VARIANCE_BINS) - 1)
    )

    families: list[FamilyStats] = []
    for family in sorted({e.family for e in entries}):
        members = [e for e in entries if e.family == family]
        episodes = sum(episodes_by_task[e.task_id] for e in members)
        explored = [stats[e.task_id].variance for e in members if stats[e.task_id].explored]
        families.append(
            FamilyStats(
                family=family,
                tasks=len(members),
                generated=sum(e.origin == "generated" for e in members),
                episodes=episodes,
                success_rate=sum(successes_by_task[e.task_id] for e in members) / episodes
                if episodes
                else 0.0,
                mean_variance=float(np.mean(explored)) if explored else 0.0,
            )
        )
    return CurriculumReport(
        path=pool.path,
        domain=domain,
        n=n,
        tasks=dict(Counter(e.origin for e in entries)),
        episodes=total_episodes,
        growth=growth,
        variances=variances,
        variance_histogram=[int(c) for c in histogram],
        families=families,
        rejections=pool.rejection_counts(),
    )


def format_report(report: CurriculumReport) -> str:
    """The report as markdown: totals, the V histogram, success by family, rejections by stage."""
    t = report.tasks
    lines = [
        f"# Curriculum pool {report.path}" + (f" ({report.domain})" if report.domain else ""),
        "",
        f"- tasks: {report.pool_size} ({t.get('seed', 0)} seed, {t.get('generated', 0)} generated"
        f"{', ' + str(t['external']) + ' external' if t.get('external') else ''})",
        f"- episodes recorded: {report.episodes}",
        f"- tasks with mixed outcomes (V > 0, latest {report.n}): {report.mixed_fraction:.1%} "
        f"of {len(report.variances)} with outcomes",
        "",
        "| V | tasks |",
        "|---|---|",
    ]
    labels = ["0"] + [
        f"({lo:.2f}, {min(hi, 0.25):.2f}]"
        for lo, hi in zip(_VARIANCE_BINS[1:-1], _VARIANCE_BINS[2:], strict=True)
    ]
    lines += [
        f"| {label} | {count} |" for label, count in zip(labels, report.variance_histogram, strict=True)
    ]
    lines += ["", "| family | tasks | generated | episodes | success | mean V |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {f.family} | {f.tasks} | {f.generated} | {f.episodes} "
        f"| {f.success_rate:.1%} | {f.mean_variance:.3f} |"
        for f in report.families
    ]
    if report.rejections:
        lines += ["", "| rejected at | candidates |", "|---|---|"]
        lines += [f"| {stage} | {count} |" for stage, count in report.rejections.items()]
    return "\n".join(lines)


def plot_report(report: CurriculumReport, path: str | os.PathLike[str]) -> Path:
    """Draw pool size over episodes, the V histogram and success by family into one image.

    Raises:
        DependencyNotInstalled: matplotlib is missing (``pip install "dreamgym-env[plot]"``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise DependencyNotInstalled("matplotlib", "plot", "Curriculum plots") from e

    fig, (ax_growth, ax_var, ax_family) = plt.subplots(1, 3, figsize=(15, 4.2))
    if report.growth:
        x = [g[0] for g in report.growth]
        ax_growth.step(x, [g[1] for g in report.growth], where="post", label="seed")
        ax_growth.step(x, [g[2] for g in report.growth], where="post", label="generated")
        ax_growth.step(
            x,
            [g[1] + g[2] for g in report.growth],
            where="post",
            label="total",
            color="black",
            linestyle="--",
        )
        ax_growth.legend()
    ax_growth.set(title="Pool size", xlabel="episodes recorded", ylabel="tasks")

    edges = np.asarray(_VARIANCE_BINS)
    ax_var.bar(range(len(report.variance_histogram)), report.variance_histogram, color="tab:purple")
    ax_var.set_xticks(
        range(len(report.variance_histogram)),
        ["0"] + [f"≤{min(hi, 0.25):.2f}" for hi in edges[2:]],
        rotation=30,
    )
    ax_var.set(title=f"Group reward variance V (latest {report.n})", xlabel="V", ylabel="tasks")

    names = [f.family for f in report.families]
    ax_family.barh(names, [f.success_rate for f in report.families], color="tab:green")
    ax_family.set(title="Success by task family", xlabel="success rate", xlim=(0, 1))
    ax_family.invert_yaxis()

    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
