"""The durable half of the replay buffer: transitions and their embeddings in SQLite (WAL mode).

:func:`open_store` picks the store from the location: a file or ``":memory:"`` opens this SQLite
store, the embedded default; a ``postgresql://`` URL opens
:class:`~dreamgym_env.buffer.store_postgres.PostgresTransitionStore`, which every process of a
cluster can share, with the same API and guarantees. Both run the same statements, written once in
:class:`~dreamgym_env.buffer.store_sql.SQLTransitionStore`; this module keeps what is SQLite's own
(the schema's types, ``BEGIN IMMEDIATE`` and savepoints, ``AUTOINCREMENT``'s record of the largest id,
``PRAGMA data_version``).

Why SQLite in WAL mode: it is proven, embedded, and gives exactly the guarantees the buffer needs.
Every batch is written in one ``BEGIN IMMEDIATE`` transaction, so a process killed at any moment leaves
each batch either fully committed or absent, and a reopened file holds exactly the committed rows.
Several processes on one machine may write at once: SQLite serialises writers, and ``busy_timeout``
makes a writer wait for the lock instead of failing.

Row ids come from ``AUTOINCREMENT`` and are never reused, so an in-memory index can catch up with
other processes' writes by asking for ``id > watermark``, and with their evictions through the
append-only ``evictions`` log.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from dreamgym_env.buffer.store_sql import (
    COLUMNS,
    SCHEMA_VERSION,
    Dialect,
    SQLTransitionStore,
    StoredRow,
    row_to_transition,
    row_values,
)
from dreamgym_env.errors import StoreError
from dreamgym_env.storage.sqlite import database_kind, open_sqlite, rollback, table_names
from dreamgym_env.storage.urls import is_postgres_url
from dreamgym_env.types import Transition

__all__ = ["SCHEMA_VERSION", "Store", "StoredRow", "TransitionStore", "open_store", "row_to_transition"]

# Only a known dedup key is skipped; any other refused row (a CHECK or NOT NULL) fails the batch, as
# on PostgreSQL. (``INSERT OR IGNORE`` would skip those too and report them as duplicates.)
_INSERT = (
    f"INSERT INTO transitions ({COLUMNS}) VALUES ({', '.join('?' * 17)}) ON CONFLICT (dedup_key) DO NOTHING"
)


class TransitionStore(SQLTransitionStore):
    """SQLite storage of transitions, their dedup keys and embeddings.

    One connection per store object; a store may be used from several threads of one process (calls
    are serialised by a lock). Each process opens its own store on the same file.

    Args:
        path: Database file, or ``":memory:"``.
        busy_timeout_s: How long to wait for another writer's lock.
        synchronous: ``"NORMAL"`` (survives process crashes) or ``"FULL"`` (also power loss).
        read_only: Open an existing buffer file for reading only (SQLite's ``mode=ro``): no table is
            created, any write fails, and a file that is not a replay buffer is refused, saying what it is.
        create: Make the buffer's tables in a file that has none (a new file, or a task pool's file
            the buffer is to share). ``False`` refuses such a file instead, as ``read_only`` does.
    """

    dialect = Dialect(meta="meta", transitions="transitions", evictions="evictions")
    _errors = (sqlite3.Error,)

    def __init__(
        self,
        path: str,
        busy_timeout_s: float = 30.0,
        synchronous: str = "NORMAL",
        *,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._tx_depth = 0
        self._conn = open_sqlite(
            path,
            what="replay buffer",
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            read_only=read_only,
        )
        if read_only:
            self._check_is_buffer()
            self._check_schema_version()
            return
        if not create and path != ":memory:":
            self._check_is_buffer()
        try:
            with self._write():
                for statement in self.dialect.schema():
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
        except sqlite3.Error as e:
            self._conn.close()
            raise StoreError(f"cannot open replay buffer store {path!r}: {e}") from e
        self._check_schema_version()

    def _check_is_buffer(self) -> None:
        """Refuse a file without the buffer's tables, naming what it holds.

        For a reader, and a writer that must not make a buffer (``create=False``): opening would add
        the tables (a task pool may share the buffer's file), and "0 transitions" would hide that the
        path names something else.
        """
        try:
            found = table_names(self._conn)
        except sqlite3.Error as e:
            self._conn.close()
            raise StoreError(f"cannot read {self.path}: {e}") from e
        if {self.dialect.meta, self.dialect.transitions, self.dialect.evictions} <= found:
            return
        self._conn.close()
        raise StoreError(
            f"{self.path} is not a replay buffer: it is {database_kind(found)}; give a buffer file "
            "(`dreamgym buffer import` makes one)"
        )

    # -- transactions -------------------------------------------------------------------------------

    class _Tx:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; inside an open transaction, a savepoint of it instead."""

        def __init__(self, store: TransitionStore) -> None:
            self.store = store
            self.depth = 0

        def __enter__(self) -> sqlite3.Connection:
            store = self.store
            store._lock.acquire()
            try:
                self.depth = store._tx_depth
                store._conn.execute("BEGIN IMMEDIATE" if self.depth == 0 else f"SAVEPOINT tx{self.depth}")
                store._tx_depth += 1
            except BaseException:
                try:
                    if self.depth == 0:  # an interrupted BEGIN can leave a transaction open
                        rollback(store._conn)
                finally:
                    store._lock.release()
                raise
            return store._conn

        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            store = self.store
            conn = store._conn
            try:
                store._tx_depth = self.depth
                if self.depth == 0:
                    if exc_type is not None:
                        rollback(conn)  # SQLite may have rolled back already: keep the caller's error
                        return
                    try:
                        conn.execute("COMMIT")
                    except BaseException:
                        rollback(conn)  # a failed COMMIT leaves the write lock held: free it
                        raise
                elif conn.in_transaction:  # else SQLite rolled back the outer transaction itself
                    if exc_type is not None:
                        conn.execute(f"ROLLBACK TO tx{self.depth}")
                    conn.execute(f"RELEASE tx{self.depth}")
            finally:
                store._lock.release()

    def _write(self) -> TransitionStore._Tx:
        """A write transaction that takes SQLite's write lock up front (no lock-upgrade deadlocks)."""
        return TransitionStore._Tx(self)

    def transaction(self) -> TransitionStore._Tx:
        """One transaction around several writes: they all commit at the end of the block, or none do.

        Writes inside it (``insert``, ``set_meta``, ...) become savepoints of it. The file's write lock
        is held for the whole block, so other writers wait for it (up to their busy timeout).
        """
        return TransitionStore._Tx(self)

    # -- engine hooks -------------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:  # a StoreError, as from the PostgreSQL store
            raise self._error("could not read", e) from e

    def _error(self, action: str, e: BaseException) -> StoreError:
        return StoreError(f"{action} {self.path}: {e}")

    def _insert_rows(
        self, conn: Any, transitions: Sequence[Transition], keys: Sequence[bytes], embeddings: np.ndarray
    ) -> list[int | None]:
        """One ``INSERT`` per row: ``lastrowid`` is the new id, a zero rowcount a known dedup key."""
        cursor = conn.cursor()
        ids: list[int | None] = []
        for t, key, vector in zip(transitions, keys, embeddings, strict=True):
            cursor.execute(_INSERT, row_values(t, key, vector))
            ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
        return ids

    def _evict_oldest(self, conn: Any, n: int) -> list[int]:
        rows = conn.execute(
            "SELECT id, domain FROM transitions WHERE source = 'sim' ORDER BY id LIMIT ?", (n,)
        ).fetchall()
        conn.executemany("INSERT INTO evictions (id, domain) VALUES (?, ?)", rows)
        conn.executemany("DELETE FROM transitions WHERE id = ?", [(r[0],) for r in rows])
        return [int(r[0]) for r in rows]

    # -- what only SQLite knows ---------------------------------------------------------------------

    def max_id(self) -> int:
        """The largest row id ever handed out (0 for a new store): ``AUTOINCREMENT``'s own record."""
        rows = self._rows("SELECT seq FROM sqlite_sequence WHERE name = 'transitions'")
        return 0 if not rows else int(rows[0][0])

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever another connection commits, never for our own commits.

        One cheap pragma tells a reader whether anything but its own writes could have changed the file.
        """
        return int(self._rows("PRAGMA data_version")[0][0])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


class Store(Protocol):
    """What the replay buffer needs from its store.

    :class:`TransitionStore` (SQLite) and
    :class:`~dreamgym_env.buffer.store_postgres.PostgresTransitionStore` both provide it.
    """

    path: str
    """Where the store lives, safe to show (a URL's password is redacted)."""

    def get_meta(self, key: str) -> str | None: ...  # noqa: D102
    def set_meta(self, key: str, value: str) -> None: ...  # noqa: D102
    def transaction(self) -> AbstractContextManager[Any]: ...  # noqa: D102
    def insert(  # noqa: D102
        self,
        transitions: Sequence[Transition],
        keys: Sequence[bytes],
        embeddings: np.ndarray,
        max_synthetic: int | None = None,
    ) -> tuple[list[int | None], list[int]]: ...
    def count(self, *, domain: str | None = None, source: str | None = None) -> int: ...  # noqa: D102
    def episode_row_ids(self, episode_ids: Iterable[str]) -> dict[str, set[int]]: ...  # noqa: D102
    def stats(self) -> list[tuple[str, str, int]]: ...  # noqa: D102
    def max_id(self) -> int: ...  # noqa: D102
    def max_eviction_seq(self) -> int: ...  # noqa: D102
    def rows_after(self, watermark: int, batch_size: int = 50_000) -> Iterator[list[StoredRow]]: ...  # noqa: D102
    def evictions_after(self, seq: int) -> list[tuple[int, int, str]]: ...  # noqa: D102
    def get(self, ids: Sequence[int]) -> dict[int, Transition]: ...  # noqa: D102
    def data_version(self) -> int: ...  # noqa: D102
    def iter_transitions(  # noqa: D102
        self, *, domain: str | None = None, source: str | None = None, batch_size: int = 10_000
    ) -> Iterator[Transition]: ...
    def replace_embeddings(self, items: Iterable[tuple[int, np.ndarray]]) -> None: ...  # noqa: D102
    def set_reasoning(self, items: Iterable[tuple[str, int, str]]) -> int: ...  # noqa: D102
    def iter_pairs(self, batch_size: int = 10_000) -> Iterator[list[tuple[int, str, str]]]: ...  # noqa: D102
    def close(self) -> None: ...  # noqa: D102


def open_store(
    location: str,
    busy_timeout_s: float = 30.0,
    synchronous: str = "NORMAL",
    *,
    read_only: bool = False,
    create: bool = True,
) -> Store:
    """The store at ``location``: PostgreSQL for a ``postgresql://`` URL, else a SQLite file (or memory).

    Args:
        location: A SQLite file, ``":memory:"``, or ``postgresql://user:password@host:port/dbname``.
        busy_timeout_s: How long a writer waits for another writer's lock (and, for PostgreSQL, the
            connect timeout).
        synchronous: SQLite's ``synchronous`` pragma (PostgreSQL commits are durable by the server's
            own settings).
        read_only: Open an existing SQLite buffer for reading only (see :class:`TransitionStore`); a
            PostgreSQL store is opened as usual.
        create: ``False`` refuses a SQLite file without the buffer's tables instead of making them.
    """
    if is_postgres_url(location):
        from dreamgym_env.buffer.store_postgres import PostgresTransitionStore

        return PostgresTransitionStore(location, busy_timeout_s)
    return TransitionStore(location, busy_timeout_s, synchronous, read_only=read_only, create=create)
