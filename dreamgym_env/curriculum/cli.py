"""``dreamgym curriculum stats|plot|generate``: read and grow a curriculum task pool from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dreamgym_env.errors import DreamGymError

__all__ = ["add_curriculum_commands"]


def _open_pool(path: str, *, must_exist: bool = True) -> Any:
    from dreamgym_env.curriculum.pool import TaskPool
    from dreamgym_env.storage.urls import is_postgres_url

    if must_exist and path != ":memory:" and not is_postgres_url(path) and not Path(path).exists():
        raise DreamGymError(
            f"no task pool at {path}; give the pool file a training run wrote (CurriculumSampler(path))"
        )
    return TaskPool(path)


def _cmd_stats(args: argparse.Namespace) -> int:
    from dreamgym_env.curriculum.report import build_report, format_report

    with _open_pool(args.pool) as pool:
        report = build_report(pool, domain=args.domain, n=args.n)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from dreamgym_env.curriculum.report import build_report, plot_report

    with _open_pool(args.pool) as pool:
        report = build_report(pool, domain=args.domain, n=args.n)
    print(f"wrote {plot_report(report, args.output)}")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from dreamgym_env.config import BackendConfig
    from dreamgym_env.curriculum.sampler import CurriculumSampler
    from dreamgym_env.experience.backends import make_backend

    fields: dict[str, Any] = {"backend": "openai"}
    if args.base_url:
        fields["base_url"] = args.base_url
    if args.model:
        fields["model"] = args.model
    backend = make_backend(BackendConfig(**fields))
    with _open_pool(args.pool, must_exist=False) as pool:
        sampler = CurriculumSampler(
            pool,
            args.domain,
            backend=backend,
            group_n=args.n,
            parents_per_update=args.parents,
            candidates_per_task=args.candidates,
        )
        result = sampler.update(seed=args.seed)
    for task in result.accepted:
        print(f"accepted {task.task_id} (parent {task.parent_id}): {task.instruction}")
    for rejection in result.rejected:
        print(
            f"rejected [{rejection.stage}] (parent {rejection.parent_id}): {rejection.reason}",
            file=sys.stderr,
        )
    if not result.parents:
        print("no task has mixed outcomes (V > 0) yet: record episodes first", file=sys.stderr)
    print(
        f"{len(result.accepted)} accepted, {len(result.rejected)} rejected, "
        f"from {len(result.parents)} parents"
    )
    return 0


def add_curriculum_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``curriculum`` command and its ``stats``, ``plot`` and ``generate`` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("pool", help="task pool file (SQLite) written by a CurriculumSampler")
    common.add_argument("--domain", help="report on one domain only")
    common.add_argument(
        "-n", type=int, default=8, help="latest rollouts per task for the variance V (default 8)"
    )

    curriculum = subparsers.add_parser("curriculum", help="inspect and grow a curriculum task pool")
    commands = curriculum.add_subparsers(
        dest="curriculum_command", required=True, metavar="{stats,plot,generate}"
    )

    p = commands.add_parser(
        "stats", parents=[common], help="pool size, V distribution, success by task family"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_stats)

    p = commands.add_parser("plot", parents=[common], help="draw the statistics into an image (needs [plot])")
    p.add_argument("-o", "--output", default="curriculum.png", help="image file (default curriculum.png)")
    p.set_defaults(func=_cmd_plot)

    p = commands.add_parser("generate", help="one generation round: variants of the top tasks by V")
    p.add_argument("pool", help="task pool file (created with the domain's seed tasks if missing)")
    p.add_argument("--domain", required=True, help="domain whose tasks are varied")
    p.add_argument("-n", type=int, default=8, help="latest rollouts per task for the variance V (default 8)")
    p.add_argument("--base-url", help="experience-model endpoint (default $DREAMGYM_BASE_URL)")
    p.add_argument("--model", help="served model name (default $DREAMGYM_MODEL)")
    p.add_argument("--parents", type=int, default=8, help="top tasks by V to vary (default 8)")
    p.add_argument("--candidates", type=int, default=4, help="variants asked for per parent (default 4)")
    p.add_argument("--seed", type=int, help="sampling seed of the requests")
    p.set_defaults(func=_cmd_generate)
