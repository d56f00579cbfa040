"""What every loader yields: whole records (one episode's transitions) or issues, never half a record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dreamgym_env.types import Transition

__all__ = ["LoadIssue", "Loader", "Record", "iter_json_lines", "line_of_key"]


@dataclass(frozen=True)
class Record:
    """All transitions of one source record (an episode, a session, a conversation).

    A record is stored whole or not at all, so a malformed line never leaves half an episode behind.
    """

    transitions: list[Transition]
    path: str
    line: int | None


@dataclass(frozen=True)
class LoadIssue:
    """A record that could not be read: where it is and what was wrong with it."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


class Loader(Protocol):
    """Reads one file into records and issues."""

    def __call__(self, path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
        """Yield each record of ``path`` or the issue that kept it out."""
        ...


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any | LoadIssue]]:
    """Yield (1-based line number, parsed JSON or issue) for every non-blank line of a JSONL file."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as e:
                yield number, LoadIssue(str(path), number, f"not valid JSON ({e.msg} at column {e.colno})")


def line_of_key(text: str, key: str) -> int | None:
    """1-based line of the first occurrence of a JSON object key in ``text`` (for error reports)."""
    position = text.find(json.dumps(key) + ":")
    return None if position < 0 else text.count("\n", 0, position) + 1
