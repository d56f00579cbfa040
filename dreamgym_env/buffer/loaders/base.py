"""What every loader yields: whole records (one episode's transitions) or issues, never half a record."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dreamgym_env.domains.task_files import json_lines
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Transition


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


TEXT_ENCODING = "utf-8-sig"
"""How loaders read files: UTF-8, with or without a byte-order mark."""

_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def check_encoding(path: Path, chunk_size: int = 1 << 20) -> None:
    """Raise :class:`DataFormatError` unless ``path`` is UTF-8 text (a UTF-8 byte-order mark is fine).

    Read in chunks through an incremental decoder, so a large file costs no memory; the error names
    the line and byte of the first undecodable character and says how to convert the file. UTF-16
    and UTF-32 are recognised by their byte-order mark, or, without one, by NUL bytes.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")  # a UTF-8 byte-order mark decodes too
    convert = (
        f"convert it first, e.g. iconv -f <its encoding> -t UTF-8 {path} > {path.stem}.utf8{path.suffix}"
    )
    offset = 0
    lines = 1
    with path.open("rb") as f:
        while True:
            chunk = f.read(chunk_size)
            if offset == 0:
                for bom, name in _BOMS:
                    if chunk.startswith(bom):
                        raise DataFormatError(
                            f"file is {name} text (byte-order mark); the importer reads UTF-8: "
                            + convert.replace("<its encoding>", name),
                            path=str(path),
                        )
            if b"\x00" in chunk:
                where = offset + chunk.index(b"\x00")
                raise DataFormatError(
                    f"byte {where} is NUL: UTF-16/UTF-32 text or a binary file, not UTF-8; {convert}",
                    path=str(path),
                    line=lines + chunk[: where - offset].count(b"\n"),
                )
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                # The decoder may hold back up to 3 bytes of the previous chunk: count from where it stopped.
                position = max(e.start - len(e.object) + len(chunk), 0)
                byte = chunk[position : position + 1].hex() or "end of file"
                line = lines + chunk[:position].count(b"\n")
                raise DataFormatError(
                    f"not UTF-8 (byte 0x{byte} at offset {offset + position}, {e.reason}); {convert}",
                    path=str(path),
                    line=line,
                ) from e
            if not chunk:
                return
            lines += chunk.count(b"\n")
            offset += len(chunk)


def read_text(path: Path) -> str:
    """The text of a UTF-8 file (checked by :func:`check_encoding` first; a byte-order mark is dropped)."""
    check_encoding(path)
    return path.read_text(encoding=TEXT_ENCODING)


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any | LoadIssue]]:
    """Yield (1-based line number, parsed JSON or issue) for every non-blank line of a JSONL file."""
    check_encoding(path)
    with path.open(encoding=TEXT_ENCODING) as f:
        for number, value in json_lines(f):
            if isinstance(value, json.JSONDecodeError):
                value = LoadIssue(str(path), number, f"not valid JSON ({value.msg} at column {value.colno})")
            yield number, value


def json_document(path: Path, text: str, kind: type, expected: str) -> Any:
    """``text`` parsed, or the :class:`LoadIssue` that keeps the whole file out: not JSON, or no ``kind``.

    ``expected`` says what the file should hold ("a JSON list of conversation records").
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        return LoadIssue(str(path), e.lineno, f"not valid JSON ({e.msg})")
    if not isinstance(document, kind):
        return LoadIssue(str(path), 1, f"expected {expected}")
    return document


def line_of_key(text: str, key: str) -> int | None:
    """1-based line of the first occurrence of a JSON object key in ``text`` (for error reports)."""
    position = text.find(json.dumps(key) + ":")
    return None if position < 0 else text.count("\n", 0, position) + 1
