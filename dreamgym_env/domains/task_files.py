"""Reading the benchmarks' task files: JSON and JSON-lines with errors that name the file and line.

Shared by the per-domain task loaders (:mod:`~dreamgym_env.domains.webshop.tasks`,
:mod:`~dreamgym_env.domains.webarena.tasks`, :mod:`~dreamgym_env.domains.alfworld.tasks`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dreamgym_env.errors import DataFormatError


def read_json(path: Path) -> Any:
    """Parse a JSON file, turning every failure into a DataFormatError that points at the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise DataFormatError("file not found; check the path", path=str(path)) from e
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e}", path=str(path)) from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"invalid JSON: {e.msg}", path=str(path), line=e.lineno) from e


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON-lines file."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e}", path=str(path)) from e
    with handle:
        for lineno, record in json_lines(handle):
            if isinstance(record, json.JSONDecodeError):
                raise DataFormatError(
                    f"invalid JSON line: {record.msg}", path=str(path), line=lineno
                ) from record
            yield lineno, record


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line, the value being the parsed JSON or its error.

    A line that is not JSON yields its :class:`json.JSONDecodeError` rather than raising it, so a
    reader that reports bad lines and goes on (the replay buffer's loaders) and one that stops at the
    first (the task files) share the reading.
    """
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield lineno, json.loads(raw)
        except json.JSONDecodeError as e:
            yield lineno, e


def require(
    record: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str, line: int | None = None
) -> Any:
    """Return ``record[key]`` after checking it exists and has the expected type."""
    if not isinstance(record, Mapping):
        raise DataFormatError(
            f"{where}: expected a JSON object, got {type(record).__name__}", str(path), line
        )
    if key not in record:
        raise DataFormatError(f"{where}: missing required key {key!r}", str(path), line)
    value = record[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int subclass; a JSON true where a number belongs is still a format error.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise DataFormatError(
            f"{where}: key {key!r} must be {names}, got {type(value).__name__}", str(path), line
        )
    return value
