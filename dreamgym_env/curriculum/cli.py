"""``dreamgym curriculum stats|plot|generate``: read and grow a curriculum task pool from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dreamgym_env._argtypes import path, positive_int, text
from dreamgym_env.errors import DreamGymError


def _open_pool(path: str, *, must_exist: bool = True) -> Any:
    """The pool at ``path``; one that must exist is only read (``mode=ro``), so the file stays as it was."""
    from dreamgym_env.curriculum.pool import TaskPool
    from dreamgym_env.storage.urls import is_postgres_url

    local = path != ":memory:" and not is_postgres_url(path)
    if must_exist and local and not Path(path).exists():
        raise DreamGymError(
            f"no task pool at {path}; give the pool file a training run wrote (CurriculumSampler(path))"
        )
    if must_exist and local and not Path(path).is_file():
        raise DreamGymError(f"{path} is not a file: give the task pool's SQLite file")
    return TaskPool(path, read_only=must_exist and local)


_IMAGE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")


def _check_image_target(output: str, pool: str) -> Path:
    """The image file, refused before anything is read or drawn if it cannot be one.

    A folder, a missing folder, the pool itself, any other SQLite database (a buffer) or a suffix
    matplotlib cannot write would otherwise fail after the work, or overwrite a store.
    """
    from dreamgym_env.buffer.replay_buffer import check_export_target

    target = check_export_target(output, None if pool == ":memory:" else pool)
    if target.suffix.lower() not in _IMAGE_SUFFIXES:
        raise DreamGymError(
            f"{output}: the image is written as {', '.join(_IMAGE_SUFFIXES)}; name it with one of these"
        )
    return target


def _cmd_stats(args: argparse.Namespace) -> int:
    from dreamgym_env.curriculum.report import build_report, format_report

    with _open_pool(args.pool) as pool:
        report = build_report(pool, domain=args.domain, n=args.n)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from dreamgym_env.curriculum.report import build_report, plot_report

    output = _check_image_target(args.output, args.pool)
    with _open_pool(args.pool) as pool:
        report = build_report(pool, domain=args.domain, n=args.n)
    try:
        print(f"wrote {plot_report(report, output)}")
    except OSError as e:
        raise DreamGymError(f"cannot write the image {output}: {e.strerror or e}") from e
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from dreamgym_env.config import BackendConfig, validated
    from dreamgym_env.curriculum.sampler import CurriculumSampler
    from dreamgym_env.domains import get_domain
    from dreamgym_env.experience.backends import make_backend

    get_domain(args.domain)  # an unknown domain is refused before the pool file is made
    fields: dict[str, Any] = {"backend": "openai"}
    if args.base_url:
        fields["base_url"] = args.base_url
    if args.model:
        fields["model"] = args.model
    backend = make_backend(validated(BackendConfig, **fields))
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
    common.add_argument("pool", type=path, help="task pool file (SQLite) written by a CurriculumSampler")
    common.add_argument("--domain", type=text, help="report on one domain only")
    common.add_argument(
        "-n", type=positive_int, default=8, help="latest rollouts per task for the variance V (default 8)"
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
    p.add_argument("pool", type=path, help="task pool file (created with the domain's seed tasks if missing)")
    p.add_argument("--domain", type=text, required=True, help="domain whose tasks are varied")
    p.add_argument(
        "-n", type=positive_int, default=8, help="latest rollouts per task for the variance V (default 8)"
    )
    p.add_argument("--base-url", type=text, help="experience-model endpoint (default $DREAMGYM_BASE_URL)")
    p.add_argument("--model", type=text, help="served model name (default $DREAMGYM_MODEL)")
    p.add_argument("--parents", type=positive_int, default=8, help="top tasks by V to vary (default 8)")
    p.add_argument(
        "--candidates", type=positive_int, default=4, help="variants asked for per parent (default 4)"
    )
    p.add_argument("--seed", type=int, help="sampling seed of the requests")
    p.set_defaults(func=_cmd_generate)
