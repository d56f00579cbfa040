"""Offline seeding: turn real trajectory files into transitions and import them into a buffer.

Formats (each module documents its own):

=================== ==================================================================================
``jsonl``           the package's own format: one Transition per line (what ``export`` writes)
``webshop-session`` WebShop human session logs, one ``.jsonl`` file (or a directory of them) per session
``webshop-il``      WebShop imitation-learning trajectories, one episode per line
``alfworld-react``  ALFWorld transcripts in the ReAct prompt format (a JSON object of transcripts)
``agentgym``        AgentGym / ETO conversation records (a JSON list or JSONL)
``browsergym``      BrowserGym / AgentLab experiment folders (``step_<n>.pkl.gz``), and the real
                    browser wrappers' recordings; an episode folder or a folder of them
=================== ==================================================================================

Every loader yields whole records (an episode) or a :class:`LoadIssue` with the file and line. Files
must be UTF-8 (a byte-order mark is fine); anything else is a
:class:`~dreamgym_env.errors.DataFormatError` naming the line. The importer writes one transaction:
it skips and reports issues (or, in strict mode, raises on the first), and any error rolls back the
whole import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dreamgym_env.buffer.loaders.agentgym import load_agentgym
from dreamgym_env.buffer.loaders.alfworld import load_alfworld_react
from dreamgym_env.buffer.loaders.base import (
    TEXT_ENCODING,
    Loader,
    LoadIssue,
    Record,
    check_encoding,
    read_text,
)
from dreamgym_env.buffer.loaders.browsergym import is_experiment_folder, load_browsergym
from dreamgym_env.buffer.loaders.jsonl import load_jsonl
from dreamgym_env.buffer.loaders.webshop import load_webshop_il, load_webshop_session
from dreamgym_env.buffer.validation import transition_problem
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Transition

if TYPE_CHECKING:
    from dreamgym_env.buffer.replay_buffer import ReplayBuffer

__all__ = [
    "FORMATS",
    "ImportReport",
    "LoadIssue",
    "Loader",
    "Record",
    "detect_format",
    "expand_inputs",
    "import_files",
    "iter_records",
]

#: Offline-data format name -> its loader (the ``fmt`` that :func:`import_files` takes).
FORMATS: dict[str, Loader] = {
    "jsonl": load_jsonl,
    "webshop-session": load_webshop_session,
    "webshop-il": load_webshop_il,
    "alfworld-react": load_alfworld_react,
    "agentgym": load_agentgym,
    "browsergym": load_browsergym,
}


def _files(path: Path) -> list[Path]:
    if path.is_dir() and (is_experiment_folder(path) or any(is_experiment_folder(p) for p in path.iterdir())):
        return [path]  # BrowserGym/AgentLab: the loader reads the folder
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json", ".txt"))
        if not files:
            raise DataFormatError("directory holds no .jsonl, .json or .txt files", path=str(path))
        return files
    if not path.exists():
        raise DataFormatError("no such file or directory", path=str(path))
    return [path]


def expand_inputs(paths: Sequence[str | Path]) -> list[Path]:
    """The files (or experiment folders) an import of ``paths`` reads, each folder expanded.

    Lets a caller check every input before it opens (and so creates) the buffer.

    Raises:
        DataFormatError: a path does not exist, or is a folder with no file to import.
    """
    return [file for p in paths for file in _files(Path(p))]


def _first_json_line(path: Path) -> object:
    with path.open(encoding=TEXT_ENCODING) as f:
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
    if first.is_dir():
        return "browsergym"
    check_encoding(first)
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
            obj = json.loads(read_text(first))
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
            if file.is_file():
                check_encoding(file)
            for item in loader(file, domain=domain):
                yield _checked(item)


def _checked(item: Record | LoadIssue) -> Record | LoadIssue:
    """The record, or an issue if one of its transitions could not be stored (a NaN reward, ...)."""
    if isinstance(item, LoadIssue):
        return item
    for position, t in enumerate(item.transitions):
        problem = transition_problem(t)
        if problem is not None:
            return LoadIssue(
                item.path, item.line, f"transition {position} (step {t.step}) of the record: {problem}"
            )
    return item


@dataclass
class ImportReport:
    """What an import did."""

    files: int = 0
    records: int = 0
    transitions_read: int = 0
    stored: int = 0
    duplicates: int = 0
    issues: list[LoadIssue] = field(default_factory=list)
    dedup: str | None = None
    """The buffer's duplicate rule (:attr:`BufferConfig.dedup <dreamgym_env.buffer.config.BufferConfig.dedup>`)."""

    def summary(self) -> str:
        """One line for humans: what was read, stored and dropped, and why a duplicate was dropped."""
        line = (
            f"{self.records} records, {self.transitions_read} transitions read: {self.stored} stored, "
            f"{self.duplicates} dropped as duplicates, {len(self.issues)} malformed records skipped"
        )
        if self.duplicates and self.dedup == "content":
            line += (
                " (dedup 'content' keeps one copy of each (state, action, next state), which leaves gaps in "
                "the episodes that repeat a step; --dedup episode, or dedup='episode', keeps every episode whole)"
            )
        elif self.duplicates and self.dedup == "episode":
            line += " (the same steps of the same episodes, already stored)"
        return line


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
    """Import trajectory files into ``buffer`` in one transaction: all of it is stored, or nothing.

    Malformed records are skipped and reported (their file and line), or, with ``strict``, the first
    one raises. Any error (a strict-mode record, a file that is not UTF-8, a failing write, an
    interrupt) rolls the whole import back, so a failed import can simply be run again.

    Args:
        buffer: The destination.
        paths: Files or directories.
        fmt: A key of :data:`FORMATS`, or ``"auto"`` to detect each path's format.
        domain: Overrides the domain the loader would assign.
        strict: Raise on the first malformed record, writing nothing.
        progress: Show a tqdm progress bar of transitions read.
        batch_size: Transitions embedded and inserted at a time.

    Returns:
        Counts of what was read, stored, deduplicated and skipped, with every issue.

    Raises:
        DataFormatError: For a file that cannot be read as its format (not UTF-8, not JSON where the
            whole file must be), or in strict mode for the first malformed record (with its file and
            line); nothing is written.
    """
    report = ImportReport(files=sum(len(_files(Path(p))) for p in paths), dedup=buffer.config.dedup)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(unit=" transitions", desc="importing")

    def transitions() -> Iterator[Transition]:
        for item in iter_records(paths, fmt, domain=domain):
            if isinstance(item, LoadIssue):
                if strict:
                    raise DataFormatError(
                        f"{item.message} (strict mode: the import stopped here and wrote nothing)",
                        path=item.path,
                        line=item.line,
                    )
                report.issues.append(item)
                continue
            report.records += 1
            report.transitions_read += len(item.transitions)
            if bar is not None:
                bar.update(len(item.transitions))
            yield from item.transitions

    try:
        result = buffer.add_many(transitions(), batch_size=batch_size)
    finally:
        if bar is not None:
            bar.close()
    report.stored, report.duplicates = result.stored, result.duplicates
    return report
