"""Offline seeding: turn real trajectory files into transitions and import them into a buffer.

Formats (each module documents its own):

=================== ==================================================================================
``jsonl``           the package's own format: one Transition per line (what ``export`` writes)
``webshop-session`` WebShop human session logs, one ``.jsonl`` file (or a directory of them) per session
``webshop-il``      WebShop imitation-learning trajectories, one episode per line
``alfworld-react``  ALFWorld transcripts in the ReAct prompt format (a JSON object of transcripts)
``agentgym``        AgentGym / ETO conversation records (a JSON list or JSONL)
=================== ==================================================================================

Every loader yields whole records (an episode) or a :class:`LoadIssue` with the file and line. The
importer stores records whole, skips and reports issues, or, in strict mode, checks every file first
and raises :class:`~dreamgym_env.errors.DataFormatError` before writing anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dreamgym_env.buffer.loaders.agentgym import load_agentgym
from dreamgym_env.buffer.loaders.alfworld import load_alfworld_react
from dreamgym_env.buffer.loaders.base import Loader, LoadIssue, Record
from dreamgym_env.buffer.loaders.jsonl import load_jsonl
from dreamgym_env.buffer.loaders.webshop import load_webshop_il, load_webshop_session
from dreamgym_env.errors import DataFormatError
from dreamgym_env.types import Transition

if TYPE_CHECKING:
    from dreamgym_env.buffer.replay_buffer import ReplayBuffer

__all__ = [
    "FORMATS",
    "ImportReport",
    "LoadIssue",
    "Loader",
    "Record",
    "detect_format",
    "import_files",
    "iter_records",
]

FORMATS: dict[str, Loader] = {
    "jsonl": load_jsonl,
    "webshop-session": load_webshop_session,
    "webshop-il": load_webshop_il,
    "alfworld-react": load_alfworld_react,
    "agentgym": load_agentgym,
}


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json", ".txt"))
        if not files:
            raise DataFormatError("directory holds no .jsonl, .json or .txt files", path=str(path))
        return files
    if not path.exists():
        raise DataFormatError("no such file or directory", path=str(path))
    return [path]


def _first_json_line(path: Path) -> object:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None
    return None


def detect_format(path: str | Path) -> str:
    """Guess the format of a file (or of the first file in a directory) from its content.

    Raises:
        DataFormatError: When no known format matches; the message lists the formats to pass explicitly.
    """
    first = _files(Path(path))[0]
    if first.suffix == ".txt":
        return "alfworld-react"
    if first.suffix == ".jsonl":
        obj = _first_json_line(first)
        if isinstance(obj, dict):
            if "page" in obj and "goal" in obj:
                return "webshop-session"
            if "states" in obj and "actions" in obj:
                return "webshop-il"
            if "conversations" in obj:
                return "agentgym"
            if "state" in obj and "action" in obj and "episode_id" in obj:
                return "jsonl"
    elif first.suffix == ".json":
        try:
            obj = json.loads(first.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataFormatError(f"not valid JSON ({e.msg})", path=str(first), line=e.lineno) from e
        if isinstance(obj, dict) and obj and all(isinstance(v, str) for v in obj.values()):
            return "alfworld-react"
        if isinstance(obj, list) and obj and isinstance(obj[0], dict) and "conversations" in obj[0]:
            return "agentgym"
    raise DataFormatError(
        f"cannot tell the format of this file; pass one of {sorted(FORMATS)} explicitly", path=str(first)
    )


def iter_records(
    paths: Sequence[str | Path], fmt: str = "auto", *, domain: str | None = None
) -> Iterator[Record | LoadIssue]:
    """Yield the records and issues of every file under ``paths`` (files or directories)."""
    for raw in paths:
        path = Path(raw)
        kind = detect_format(path) if fmt == "auto" else fmt
        if kind not in FORMATS:
            raise DataFormatError(
                f"unknown format {kind!r}; known formats: {sorted(FORMATS)}", path=str(path)
            )
        loader = FORMATS[kind]
        for file in _files(path):
            yield from loader(file, domain=domain)


@dataclass
class ImportReport:
    """What an import did."""

    files: int = 0
    records: int = 0
    transitions_read: int = 0
    stored: int = 0
    duplicates: int = 0
    issues: list[LoadIssue] = field(default_factory=list)

    def summary(self) -> str:
        """One line for humans."""
        return (
            f"{self.records} records, {self.transitions_read} transitions read: {self.stored} stored, "
            f"{self.duplicates} duplicates skipped, {len(self.issues)} malformed records skipped"
        )


def import_files(
    buffer: ReplayBuffer,
    paths: Sequence[str | Path],
    fmt: str = "auto",
    *,
    domain: str | None = None,
    strict: bool = False,
    progress: bool = False,
    batch_size: int = 2048,
) -> ImportReport:
    """Import trajectory files into ``buffer``, whole records at a time.

    Args:
        buffer: The destination.
        paths: Files or directories.
        fmt: A key of :data:`FORMATS`, or ``"auto"`` to detect each path's format.
        domain: Overrides the domain the loader would assign.
        strict: Check every file first and raise on the first malformed record, writing nothing.
        progress: Show a tqdm progress bar of transitions stored.
        batch_size: Transitions per write transaction (records are never split across transactions).

    Returns:
        Counts of what was read, stored, deduplicated and skipped, with every issue.

    Raises:
        DataFormatError: In strict mode, for the first malformed record (with its file and line).
    """
    if strict:
        for item in iter_records(paths, fmt, domain=domain):
            if isinstance(item, LoadIssue):
                raise DataFormatError(item.message, path=item.path, line=item.line)
    report = ImportReport(files=sum(len(_files(Path(p))) for p in paths))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(unit=" transitions", desc="importing")
    pending: list[Transition] = []

    def flush() -> None:
        result = buffer.add_many(pending)
        report.stored += result.stored
        report.duplicates += result.duplicates
        if bar is not None:
            bar.update(len(pending))
        pending.clear()

    try:
        for item in iter_records(paths, fmt, domain=domain):
            if isinstance(item, LoadIssue):
                report.issues.append(item)
                continue
            report.records += 1
            report.transitions_read += len(item.transitions)
            if pending and len(pending) + len(item.transitions) > batch_size:
                flush()
            pending.extend(item.transitions)
        if pending:
            flush()
    finally:
        if bar is not None:
            bar.close()
    return report
