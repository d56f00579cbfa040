"""One way to open SQLite for every durable store of the package (replay buffer, task pool, recordings).

Each store needs the same things from its connection, so they are set and checked here once:

- **WAL mode** for files, checked, not assumed: a file system without shared memory (a network
  share) silently stays in another journal mode, where readers block writers; that is an error here.
- **busy timeout**: a writer waits for another process's write lock instead of failing at once.
- **synchronous**: ``NORMAL`` keeps every commit across a process crash in WAL mode, ``FULL`` also
  across a power loss; anything else is refused.
- **foreign keys** enforced (SQLite leaves them off by default).
- **the file is a SQLite database**, read before anything is written, so a wrong path (a JSONL file, a
  recording given as a buffer) is reported instead of being overwritten; optionally
  ``PRAGMA quick_check`` for a full structural check.
- autocommit connections (``isolation_level=None``): transactions are explicit, through
  :func:`write_transaction`, which takes the write lock up front (``BEGIN IMMEDIATE``) so two writers
  never deadlock upgrading a read lock.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from dreamgym_env.errors import StoreError

Synchronous = Literal["NORMAL", "FULL"]


def open_sqlite(
    path: str | Path,
    *,
    what: str,
    busy_timeout_s: float = 30.0,
    synchronous: str = "NORMAL",
    create_parents: bool = False,
    quick_check: bool = False,
    read_only: bool = False,
) -> sqlite3.Connection:
    """Open (or create) a SQLite database the way every store of the package needs it.

    ``read_only`` opens an existing file through SQLite's ``mode=ro`` URI, for tools that only read:
    SQLite itself then refuses every write, so no table, setting or journal mode can change (a WAL
    database is read as it is; SQLite may still make its ``-shm`` index beside it).

    Args:
        path: The database file, or ``":memory:"``.
        what: What is stored there ("replay buffer", "task pool", ...), for error messages.
        busy_timeout_s: How long a writer waits for another connection's write lock.
        synchronous: ``"NORMAL"`` or ``"FULL"``.
        create_parents: Create missing parent directories of ``path``.
        quick_check: Also run ``PRAGMA quick_check`` (reads every page: O(file size)).
        read_only: Open an existing file for reading only (``mode=ro``); never creates one.

    Raises:
        StoreError: The file cannot be opened, is not a SQLite database, cannot use WAL mode, fails
            the check, or a setting is out of range.
    """
    mode = synchronous.upper()
    if mode not in ("NORMAL", "FULL"):
        raise StoreError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
    if busy_timeout_s <= 0:
        raise StoreError(f"busy_timeout_s must be positive, got {busy_timeout_s!r}")
    location = str(path)
    in_memory = location == ":memory:"
    conn: sqlite3.Connection | None = None
    try:
        if read_only and (in_memory or not Path(location).expanduser().is_file()):
            raise StoreError(f"cannot open the {what} at {location} for reading: no such file")
        if create_parents and not in_memory and not read_only:
            Path(location).expanduser().parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            _read_only_uri(location) if read_only else location,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            uri=read_only,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        conn.execute("PRAGMA schema_version").fetchone()  # "file is not a database" surfaces here
        if not in_memory and not read_only:
            journal = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            if journal.lower() != "wal":
                raise StoreError(
                    f"could not switch the {what} at {location} to WAL mode (got {journal!r}); it needs a "
                    "local file system that supports shared memory (not a network share). To share one "
                    "store between machines, use a PostgreSQL URL (postgresql://...) instead of a file"
                )
        conn.execute(f"PRAGMA synchronous = {mode}")
        conn.execute("PRAGMA foreign_keys = ON")
        if quick_check:
            problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise StoreError(
                    f"the {what} at {location} is damaged ({'; '.join(problems[:5])}); restore it from a "
                    "backup or export what is readable with the sqlite3 shell's .recover"
                )
    except sqlite3.Error as e:
        if conn is not None:
            conn.close()
        raise StoreError(f"cannot open the {what} at {location}: {e}") from e
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return conn


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The tables of the database ``conn`` is open on."""
    return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def database_kind(tables: set[str]) -> str:
    """What a SQLite file holding ``tables`` is, in words, by the tables each store of the package makes.

    For the message of a reader given the wrong file ("pool.sqlite is not a replay buffer: it is a
    curriculum task pool"), which a reader must refuse rather than add its own tables to.
    """
    kinds = []
    if {"meta", "transitions", "evictions"} <= tables:
        kinds.append("a replay buffer")
    if "curriculum_tasks" in tables:
        kinds.append("a curriculum task pool")
    if "calls" in tables:
        kinds.append("a recording of experience-model calls")
    if kinds:
        return " and ".join(kinds)
    if not tables:
        return "an empty SQLite database"
    return f"a SQLite database with the tables {', '.join(sorted(tables))}"


def _read_only_uri(location: str) -> str:
    """SQLite's ``file:`` URI opening ``location`` read-only; every byte of the path percent-encoded as needed.

    The path goes through the file system's encoding, so a name that is not UTF-8 (a surrogate-escaped
    ``str``) names the same file it would open without the URI.
    """
    path = os.fsencode(os.path.abspath(Path(location).expanduser()))
    return f"file:{quote(path)}?mode=ro"


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so itself.

    After some errors (an interrupted or failed write, a full disk, an I/O error) SQLite rolls the
    whole transaction back on its own; a ROLLBACK then fails with "no transaction is active", which
    would hide the error that caused it. A failed COMMIT, on the other hand, leaves the transaction
    open and the file's write lock held, so every other writer would wait for it until it times out.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: the write lock taken up front, committed whole or rolled back whole.

    A COMMIT that fails (a deferred constraint, a full disk) rolls the transaction back before its
    error is raised, so the connection and the file's write lock are free again; so does a BEGIN
    that failed after opening the transaction (interrupted).

    Raises:
        StoreError: ``conn`` is already in a transaction (left untouched).
    """
    if conn.in_transaction:
        raise StoreError(
            "write_transaction() needs a connection with no open transaction; this one is already in a "
            "transaction (commit or roll it back first)"
        )
    try:
        conn.execute("BEGIN IMMEDIATE")
    except BaseException:
        rollback(conn)
        raise
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
