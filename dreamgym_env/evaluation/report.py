"""Fidelity results on disk: one JSON per predictor, a combined Markdown table and a bar chart.

Several ``dreamgym eval-fidelity`` runs (one per served model, since a CPU serves one at a time) write
into the same folder; each run rewrites the table and the plot from every ``*.fidelity.json`` there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from dreamgym_env.errors import DependencyNotInstalled
from dreamgym_env.evaluation.fidelity import FidelityReport
from dreamgym_env.evaluation.runner import EvalRecord

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("transitions", "n"),
    ("parse_failure_rate", "parse fail"),
    ("done_accuracy", "done acc"),
    ("success_accuracy", "success acc"),
    ("success_recall", "win recall"),
    ("success_f1", "win F1"),
    ("exact_match", "state EM"),
    ("state_f1", "state F1"),
    ("actions_f1", "actions F1"),
)
_PLOTTED = ("done_accuracy", "success_accuracy", "state_f1", "actions_f1", "parse_failure_rate")


def write_run(out_dir: str | Path, report: FidelityReport, records: Sequence[EvalRecord]) -> Path:
    """Save one predictor's report and per-transition records; refresh the folder's table and plot."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in report.name)
    path = out / f"{slug}.fidelity.json"
    path.write_text(json.dumps(report.as_dict(), indent=1) + "\n", encoding="utf-8")
    with (out / f"{slug}.predictions.jsonl").open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(asdict(r), ensure_ascii=False) + "\n")
    reports = load_reports(out)
    (out / "fidelity.md").write_text(markdown_table(reports), encoding="utf-8")
    with contextlib.suppress(DependencyNotInstalled):  # the table is the result; the plot a convenience
        _plot_reports(reports, out / "fidelity.png")
    return path


def load_reports(out_dir: str | Path) -> list[FidelityReport]:
    """Every report saved in ``out_dir``, by name."""
    reports = [
        FidelityReport(**json.loads(p.read_text(encoding="utf-8")))
        for p in sorted(Path(out_dir).glob("*.fidelity.json"))
    ]
    return sorted(reports, key=lambda r: r.name)


def _cell(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def markdown_table(reports: Sequence[FidelityReport]) -> str:
    """One row per predictor, one column per metric."""
    header = "| predictor | " + " | ".join(label for _, label in _COLUMNS) + " |"
    rule = "|---|" + "---|" * len(_COLUMNS)
    rows = [
        f"| {r.name} | " + " | ".join(_cell(getattr(r, key)) for key, _ in _COLUMNS) + " |" for r in reports
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def _plot_reports(reports: Sequence[FidelityReport], path: str | Path) -> None:
    """Grouped bars of the main metrics, one group per metric, one bar per predictor."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise DependencyNotInstalled("matplotlib", "plot", "Plotting fidelity results") from e
    width = 0.8 / max(1, len(reports))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for i, report in enumerate(reports):
        values = [getattr(report, key) or 0.0 for key in _PLOTTED]
        ax.bar([j + i * width for j in range(len(_PLOTTED))], values, width, label=report.name)
    ax.set_xticks([j + width * (len(reports) - 1) / 2 for j in range(len(_PLOTTED))])
    ax.set_xticklabels([k.replace("_", " ") for k in _PLOTTED])
    ax.set_ylim(0, 1)
    ax.set_title("Experience-model fidelity on held-out real transitions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
