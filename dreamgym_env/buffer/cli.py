"""``dreamgym buffer import|stats|search|export``: manage a replay buffer file from the shell."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dreamgym_env._argtypes import bounded_int, path, text
from dreamgym_env.buffer.config import BufferConfig, EmbedderConfig
from dreamgym_env.buffer.loaders import FORMATS, expand_inputs, import_files
from dreamgym_env.buffer.replay_buffer import ReplayBuffer, check_export_target
from dreamgym_env.config import validated
from dreamgym_env.errors import StoreError
from dreamgym_env.storage.urls import is_postgres_url


def _open(args: argparse.Namespace, *, create: bool = False) -> ReplayBuffer:
    """Open the buffer at ``args.path``; only a command that writes (``create=True``) may make one.

    The reading commands open it read-only, so they never change the file: not a table added to a
    file that is not a buffer, not a row re-embedded for another ``--embedder``, not a snapshot saved.
    """
    if not create and not is_postgres_url(args.path) and args.path != ":memory:":
        path = Path(args.path)
        if not path.exists():
            raise StoreError(
                f"{args.path} does not exist: `buffer {args.buffer_command}` reads an existing buffer "
                f"and never creates one (`dreamgym buffer import {args.path} FILES...` makes one)"
            )
        if not path.is_file():
            raise StoreError(f"{args.path} is not a file: give the path of a replay buffer's SQLite file")
    embedder: dict[str, Any] = {"kind": args.embedder}
    if args.embedding_model:
        embedder["model"] = args.embedding_model
    if args.embedding_base_url:
        embedder["base_url"] = args.embedding_base_url
    if args.dim:
        embedder["dim"] = args.dim
    config = validated(
        BufferConfig,
        path=args.path,
        create=create,
        read_only=not create,
        embedder=validated(EmbedderConfig, **embedder),
        dedup=args.dedup,
    )
    return ReplayBuffer(config)


def _cmd_import(args: argparse.Namespace) -> int:
    # Every input is checked before the buffer is opened, which creates it: a typo leaves no file.
    inputs = expand_inputs(args.files)
    buffer_file = Path(args.path)
    if buffer_file.is_file():
        for source in inputs:
            if source.is_file() and os.path.samefile(source, buffer_file):
                raise StoreError(
                    f"{source} is the buffer being imported into: give the trajectory files to import"
                )
    with _open(args, create=True) as buffer:
        report = import_files(
            buffer, args.files, args.format, domain=args.domain, strict=args.strict, progress=not args.quiet
        )
    for issue in report.issues:
        print(f"skipped: {issue}", file=sys.stderr)
    print(report.summary())
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as buffer:
        stats = buffer.stats()
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    print(f"{stats['path']}: {stats['transitions']} transitions ({stats['embedder']})")
    for row in stats["by_domain_source"]:
        print(f"  {row['domain']:<16} {row['source']:<8} {row['count']:>10}")
    for domain, shard in stats["index"].items():
        print(f"  index {domain}: {shard['kind']} ({shard['size']} vectors)")
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    with _open(args) as buffer:
        hits = buffer.search(
            args.state, args.action, args.k, domain=args.domain, exclude_episode=args.exclude_episode
        )
    if args.json:
        print(
            json.dumps([{"id": h.id, "score": h.score, **h.transition.model_dump()} for h in hits], indent=2)
        )
        return 0
    for rank, hit in enumerate(hits, start=1):
        t = hit.transition
        print(
            f"#{rank} score={hit.score:.3f} id={hit.id} {t.domain} {t.episode_id} step {t.step} ({t.source})"
        )
        print(f"   state:  {t.state[:200]!r}")
        print(f"   action: {t.action!r}")
        print(f"   next:   {t.next_state[:200]!r}")
    if not hits:
        print("no transitions match")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    # Checked before the buffer is opened: an output that is the buffer itself must not be touched.
    check_export_target(args.output, None if is_postgres_url(args.path) else args.path)
    with _open(args) as buffer:
        n = buffer.export_jsonl(args.output, domain=args.domain, source=args.source)
    print(f"wrote {n} transitions to {args.output}")
    return 0


def add_buffer_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``buffer`` command and its ``import``, ``stats``, ``search`` and ``export`` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "path",
        type=path,
        help="buffer file (SQLite; `import` creates it if missing, the other commands need it)",
    )
    common.add_argument(
        "--embedder",
        choices=["hashing", "sentence-transformers", "openai"],
        default="hashing",
        help="embedder (the one the buffer was built with: for another, import re-embeds every row and "
        "the reading commands refuse it)",
    )
    common.add_argument(
        "--embedding-model", type=text, help="model path or name for sentence-transformers/openai"
    )
    common.add_argument(
        "--embedding-base-url",
        type=text,
        help="endpoint of the openai embedder (e.g. http://127.0.0.1:8000/v1)",
    )
    common.add_argument(
        "--dim", type=bounded_int(8, 65536), help="dimension of the hashing embedder, 8-65536 (default 256)"
    )

    # The reading commands never write, so the duplicate rule changes nothing there; it is accepted, as
    # before, for scripts that pass it to every subcommand.
    reading = argparse.ArgumentParser(add_help=False, parents=[common])
    reading.add_argument(
        "--dedup", choices=["content", "episode"], default="content", help="ignored: this command only reads"
    )

    buffer = subparsers.add_parser("buffer", help="manage an experience replay buffer")
    commands = buffer.add_subparsers(
        dest="buffer_command", required=True, metavar="{import,stats,search,export}"
    )

    p = commands.add_parser("import", parents=[common], help="import real trajectory files")
    p.add_argument("files", nargs="+", type=path, help="files or directories to import")
    p.add_argument("--format", default="auto", choices=["auto", *sorted(FORMATS)], help="input format")
    p.add_argument("--domain", type=text, help="domain to assign (overrides the loader's)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail on the first malformed record (an import is one transaction: a failure writes nothing)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--dedup",
        choices=["episode", "content"],
        default="episode",
        help="duplicate rule. episode (default): only a step of an episode already stored is dropped, so "
        "every imported episode stays whole (re-importing a file adds nothing); content: one copy of "
        "each (state, action, next state), which leaves gaps in episodes that repeat another's step",
    )
    p.set_defaults(func=_cmd_import)

    p = commands.add_parser("stats", parents=[reading], help="counts per domain and source, index state")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_stats)

    p = commands.add_parser(
        "search", parents=[reading], help="top-k transitions similar to a (state, action)"
    )
    p.add_argument("--state", type=text, required=True)
    p.add_argument("--action", type=text, required=True)
    p.add_argument(
        "-k",
        type=bounded_int(1, 10_000, what="a positive integer up to 10000"),
        default=4,
        help="how many transitions (default 4)",
    )
    p.add_argument("--domain", type=text)
    p.add_argument("--exclude-episode", type=text)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_search)

    p = commands.add_parser(
        "export", parents=[reading], help="write transitions as JSONL (the import format)"
    )
    p.add_argument("output", help="destination .jsonl file")
    p.add_argument("--domain", type=text)
    p.add_argument("--source", choices=["offline", "sim", "real"])
    p.set_defaults(func=_cmd_export)
