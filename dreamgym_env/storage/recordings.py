"""The SQLite file of a recording of experience-model calls: its tables, its key version, its statements.

A recording holds one row per call in ``calls``, keyed by the request's key and its occurrence (the
how-many-th sending of that same request in the run), and the version of the key scheme in ``meta``.
:class:`RecordingFile` is what :class:`~dreamgym_env.experience.backends.recording.RecordingBackend`
writes and replays through (opened by :func:`~dreamgym_env.storage.sqlite.open_sqlite`, like every
store of the package); :func:`read_calls` is the audit's read of a whole file, which changes nothing
in it. How a request becomes a key, and a row an answer, is the backend's business, not this module's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

from dreamgym_env.errors import StoreError
from dreamgym_env.storage.sqlite import Synchronous, open_sqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    key TEXT NOT NULL,
    occurrence INTEGER NOT NULL,
    messages_sha TEXT NOT NULL,
    sampling TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached_tokens INTEGER,
    latency_s REAL NOT NULL,
    endpoint TEXT,
    finish_reason TEXT,
    extra TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (key, occurrence)
);
CREATE INDEX IF NOT EXISTS calls_messages ON calls (messages_sha);
"""


class CallRow(NamedTuple):
    """One recorded call, as the ``calls`` table holds it (its columns, in order).

    The JSON columns (``sampling``, ``request``, ``extra``) are text here: the caller encodes them.
    """

    key: str
    occurrence: int
    messages_sha: str
    sampling: str
    request: str
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    latency_s: float
    endpoint: str | None
    finish_reason: str | None
    extra: str
    recorded_at: float


_COLUMNS = ", ".join(CallRow._fields)


class RecordingFile:
    """A recording's SQLite file, open for reading and writing; created with its tables when missing.

    Not locked: the caller serialises its calls (one connection, usable from several threads).

    Args:
        path: The file (its missing parent directories are created).
        key_version: The version of the key scheme the caller writes; a file recorded with another
            is refused, since none of its keys would match.
        synchronous: SQLite's ``synchronous`` pragma: ``NORMAL`` survives process crashes, ``FULL``
            also power loss.

    Raises:
        StoreError: The file cannot be opened or is not a SQLite database, or it was recorded with
            another key version.
    """

    def __init__(self, path: Path, *, key_version: int, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self.conn = open_sqlite(path, what="recording", synchronous=synchronous, create_parents=True)
        try:
            try:
                self.conn.executescript(_SCHEMA)
                self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('key_version', ?)", (str(key_version),))
            except sqlite3.Error as e:
                raise StoreError(f"Cannot open the recording {path}: {e}") from e
            version = self.conn.execute("SELECT value FROM meta WHERE key='key_version'").fetchone()[0]
            if version != str(key_version):
                raise StoreError(
                    f"{path} was recorded with key version {version}; this version reads {key_version}. "
                    "Record the run again."
                )
        except BaseException:
            self.conn.close()
            raise

    def samplings(self, limit: int) -> list[str]:
        """Up to ``limit`` of the distinct sampling settings the calls were recorded with (JSON text)."""
        return [row[0] for row in self.conn.execute("SELECT DISTINCT sampling FROM calls LIMIT ?", (limit,))]

    def find(self, key: str, occurrence: int, *, exact: bool) -> CallRow | None:
        """The call recorded as ``occurrence`` of ``key`` or, unless ``exact``, the latest one before it."""
        op = "=" if exact else "<="
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM calls WHERE key = ? AND occurrence {op} ? ORDER BY occurrence DESC LIMIT 1",
            (key, occurrence),
        ).fetchone()
        return None if row is None else CallRow(*row)

    def write(self, row: CallRow) -> None:
        """Record a call, replacing an earlier recording of the same key and occurrence."""
        try:
            self.conn.execute(
                f"INSERT OR REPLACE INTO calls ({_COLUMNS}) VALUES ({', '.join('?' * len(row))})", row
            )
        except sqlite3.Error as e:
            raise StoreError(f"Cannot write to the recording {self.path}: {e}") from e

    def delete(self, key: str, occurrence: int) -> None:
        """Forget the call recorded as ``occurrence`` of ``key`` (none: nothing changes)."""
        try:
            self.conn.execute("DELETE FROM calls WHERE key = ? AND occurrence = ?", (key, occurrence))
        except sqlite3.Error as e:
            raise StoreError(f"Cannot write to the recording {self.path}: {e}") from e

    def count(self) -> int:
        """How many calls the file holds."""
        return int(self.conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def request_with_messages(self, messages_sha: str) -> str | None:
        """The request (JSON text) of one call whose messages hash to ``messages_sha``, if any was recorded."""
        row = self.conn.execute(
            "SELECT request FROM calls WHERE messages_sha = ? LIMIT 1", (messages_sha,)
        ).fetchone()
        return None if row is None else str(row[0])

    def occurrences(self, key: str) -> list[int]:
        """The occurrences of ``key`` recorded, ascending."""
        return [
            int(row[0])
            for row in self.conn.execute(
                "SELECT occurrence FROM calls WHERE key = ? ORDER BY occurrence", (key,)
            )
        ]

    def close(self) -> None:
        """Close the file (every call written is already committed)."""
        self.conn.close()


def read_calls(path: Path) -> list[CallRow]:
    """Every call recorded in ``path``, in the order they were recorded; the file is opened read-only.

    Raises:
        StoreError: The file is missing or not a recording.
    """
    if not path.is_file():
        raise StoreError(f"No recording at {path}")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM calls ORDER BY recorded_at, rowid").fetchall()
    except sqlite3.Error as e:
        raise StoreError(f"{path} is not a recording: {e}") from e
    finally:
        conn.close()
    return [CallRow(*row) for row in rows]
