"""The durable half of the replay buffer: transitions and their embeddings in SQLite (WAL mode).

:func:`open_store` picks the store from the location: a file or ``":memory:"`` opens this SQLite
store, the embedded default; a ``postgresql://`` URL opens
:class:`~dreamgym_env.buffer.store_postgres.PostgresTransitionStore`, which every process of a
cluster can share, with the same API and guarantees.

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
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dreamgym_env.errors import StoreError
from dreamgym_env.storage.sqlite import open_sqlite
from dreamgym_env.storage.urls import is_postgres_url
from dreamgym_env.types import Transition

__all__ = ["SCHEMA_VERSION", "Store", "StoredRow", "TransitionStore", "open_store", "row_to_transition"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dedup_key BLOB NOT NULL UNIQUE,
    domain TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    state TEXT NOT NULL,
    action TEXT NOT NULL,
    next_state TEXT NOT NULL,
    reward REAL NOT NULL,
    done INTEGER NOT NULL,
    success INTEGER NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('offline', 'sim', 'real')),
    reasoning TEXT,
    timestamp REAL NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS transitions_source ON transitions (source, id);
CREATE INDEX IF NOT EXISTS transitions_episode ON transitions (episode_id);
CREATE TABLE IF NOT EXISTS evictions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id INTEGER NOT NULL,
    domain TEXT NOT NULL
);
"""

_FIELDS = (
    "domain, task_id, task, episode_id, step, state, action, next_state, reward, done, success, source, "
    "reasoning, timestamp, metadata"
)


@dataclass(frozen=True)
class StoredRow:
    """A row's id, domain, episode and embedding: what an index needs, without the text."""

    id: int
    domain: str
    episode_id: str
    embedding: np.ndarray


def row_to_transition(row: Sequence[Any]) -> Transition:
    """A :class:`Transition` from the stored columns, in the order of ``_FIELDS``."""
    return Transition(
        domain=row[0],
        task_id=row[1],
        task=row[2],
        episode_id=row[3],
        step=row[4],
        state=row[5],
        action=row[6],
        next_state=row[7],
        reward=row[8],
        done=bool(row[9]),
        success=bool(row[10]),
        source=row[11],
        reasoning=row[12],
        timestamp=row[13],
        metadata=json.loads(row[14]),
    )


class TransitionStore:
    """SQLite storage of transitions, their dedup keys and embeddings.

    One connection per store object; a store may be used from several threads of one process (calls
    are serialised by a lock). Each process opens its own store on the same file.

    Args:
        path: Database file, or ``":memory:"``.
        busy_timeout_s: How long to wait for another writer's lock.
        synchronous: ``"NORMAL"`` (survives process crashes) or ``"FULL"`` (also power loss).
    """

    def __init__(self, path: str, busy_timeout_s: float = 30.0, synchronous: str = "NORMAL") -> None:
        self.path = path
        self._lock = threading.RLock()
        self._tx_depth = 0
        self._conn = open_sqlite(
            path, what="replay buffer", busy_timeout_s=busy_timeout_s, synchronous=synchronous
        )
        try:
            with self._write():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
        except sqlite3.Error as e:
            self._conn.close()
            raise StoreError(f"cannot open replay buffer store {path!r}: {e}") from e
        version = int(self.get_meta("schema_version") or 0)
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{path} has replay-buffer schema version {version}, this package reads version "
                f"{SCHEMA_VERSION}; export it with the version that wrote it and import it again"
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
                store._lock.release()
                raise
            return store._conn

        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            store = self.store
            try:
                store._tx_depth = self.depth
                if self.depth == 0:
                    store._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
                else:
                    if exc_type is not None:
                        store._conn.execute(f"ROLLBACK TO tx{self.depth}")
                    store._conn.execute(f"RELEASE tx{self.depth}")
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

    # -- meta ---------------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a stored setting, or ``None``."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # -- writes -------------------------------------------------------------------------------------

    def insert(
        self,
        transitions: Sequence[Transition],
        keys: Sequence[bytes],
        embeddings: np.ndarray,
        max_synthetic: int | None = None,
    ) -> tuple[list[int | None], list[int]]:
        """Insert a batch in one transaction, skipping rows whose dedup key is already stored.

        Args:
            transitions: The transitions.
            keys: One dedup key per transition.
            embeddings: (n, dim) float32 retrieval keys.
            max_synthetic: When set, evict the oldest ``sim`` rows past this many, in the same transaction.

        Returns:
            The new row id of each transition (``None`` for a duplicate) and the ids evicted.
        """
        if not (len(transitions) == len(keys) == len(embeddings)):
            raise ValueError("transitions, keys and embeddings must have the same length")
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        ids: list[int | None] = []
        evicted: list[int] = []
        try:
            with self._write() as conn:
                cursor = conn.cursor()
                for t, key, vector in zip(transitions, keys, embeddings, strict=True):
                    cursor.execute(
                        f"INSERT OR IGNORE INTO transitions (dedup_key, {_FIELDS}, embedding) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            key,
                            t.domain,
                            t.task_id,
                            t.task,
                            t.episode_id,
                            t.step,
                            t.state,
                            t.action,
                            t.next_state,
                            float(t.reward),
                            int(t.done),
                            int(t.success),
                            t.source,
                            t.reasoning,
                            float(t.timestamp),
                            json.dumps(t.metadata, ensure_ascii=False, default=str),
                            vector.tobytes(),
                        ),
                    )
                    ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
                if max_synthetic is not None and any(
                    i is not None and t.source == "sim" for i, t in zip(ids, transitions, strict=True)
                ):
                    evicted = self._evict_synthetic(conn, max_synthetic)
        except sqlite3.Error as e:
            raise StoreError(f"could not write {len(transitions)} transitions to {self.path}: {e}") from e
        return ids, evicted

    @staticmethod
    def _evict_synthetic(conn: sqlite3.Connection, max_synthetic: int) -> list[int]:
        (count,) = conn.execute("SELECT COUNT(*) FROM transitions WHERE source = 'sim'").fetchone()
        excess = count - max_synthetic
        if excess <= 0:
            return []
        rows = conn.execute(
            "SELECT id, domain FROM transitions WHERE source = 'sim' ORDER BY id LIMIT ?", (excess,)
        ).fetchall()
        conn.executemany("INSERT INTO evictions (id, domain) VALUES (?, ?)", rows)
        conn.executemany("DELETE FROM transitions WHERE id = ?", [(r[0],) for r in rows])
        return [int(r[0]) for r in rows]

    # -- reads --------------------------------------------------------------------------------------

    def count(self, *, domain: str | None = None, source: str | None = None) -> int:
        """Number of stored transitions, optionally of one domain and/or source."""
        clauses, params = [], []
        if domain is not None:
            clauses.append("domain = ?")
            params.append(domain)
        if source is not None:
            clauses.append("source = ?")
            params.append(source)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            return int(self._conn.execute(f"SELECT COUNT(*) FROM transitions{where}", params).fetchone()[0])

    def episode_row_ids(self, episode_ids: Iterable[str]) -> dict[str, set[int]]:
        """Ids of the stored transitions of each episode (read from the episode index, no row is touched)."""
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT episode_id, id FROM transitions WHERE episode_id IN ({marks})", wanted
            ).fetchall()
        found: dict[str, set[int]] = {e: set() for e in wanted}
        for episode_id, row_id in rows:
            found[episode_id].add(int(row_id))
        return found

    def stats(self) -> list[tuple[str, str, int]]:
        """(domain, source, count) for every stored combination."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT domain, source, COUNT(*) FROM transitions GROUP BY domain, source ORDER BY domain, source"  # noqa: E501
            ).fetchall()
        return [(str(d), str(s), int(c)) for d, s, c in rows]

    def max_id(self) -> int:
        """The largest row id ever handed out (0 for a new store)."""
        with self._lock:
            row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'transitions'").fetchone()
        return 0 if row is None else int(row[0])

    def max_eviction_seq(self) -> int:
        """The sequence number of the latest eviction (0 when none happened)."""
        with self._lock:
            row = self._conn.execute("SELECT MAX(seq) FROM evictions").fetchone()
        return int(row[0] or 0)

    def rows_after(self, watermark: int, batch_size: int = 50_000) -> Iterator[list[StoredRow]]:
        """Yield, in batches, the (id, domain, episode, embedding) of every row with ``id > watermark``."""
        last = watermark
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT id, domain, episode_id, embedding FROM transitions WHERE id > ? ORDER BY id LIMIT ?",  # noqa: E501
                    (last, batch_size),
                ).fetchall()
            if not rows:
                return
            yield [StoredRow(int(i), d, e, np.frombuffer(b, dtype=np.float32)) for i, d, e, b in rows]
            last = int(rows[-1][0])

    def evictions_after(self, seq: int) -> list[tuple[int, int, str]]:
        """(seq, id, domain) of every eviction after ``seq``."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT seq, id, domain FROM evictions WHERE seq > ? ORDER BY seq", (seq,)
            ).fetchall()
        return [(int(s), int(i), str(d)) for s, i, d in rows]

    def get(self, ids: Sequence[int]) -> dict[int, Transition]:
        """Fetch transitions by id, in the order of ``ids``; ids no longer stored (evicted) are absent."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT id, {_FIELDS} FROM transitions WHERE id IN ({marks})", list(ids)
            ).fetchall()
        by_id = {int(r[0]): r for r in rows}
        return {i: row_to_transition(by_id[i][1:]) for i in ids if i in by_id}

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever another connection commits, never for our own commits.

        One cheap pragma tells a reader whether anything but its own writes could have changed the file.
        """
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def iter_transitions(
        self, *, domain: str | None = None, source: str | None = None, batch_size: int = 10_000
    ) -> Iterator[Transition]:
        """Yield every stored transition in insertion order, optionally of one domain and/or source."""
        clauses, params = ["id > ?"], []
        if domain is not None:
            clauses.append("domain = ?")
            params.append(domain)
        if source is not None:
            clauses.append("source = ?")
            params.append(source)
        last = 0
        while True:
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT id, {_FIELDS} FROM transitions WHERE {' AND '.join(clauses)} ORDER BY id LIMIT ?",  # noqa: E501
                    [last, *params, batch_size],
                ).fetchall()
            if not rows:
                return
            for r in rows:
                yield row_to_transition(r[1:])
            last = int(rows[-1][0])

    def replace_embeddings(self, items: Iterable[tuple[int, np.ndarray]]) -> None:
        """Overwrite stored embeddings (after the embedder changed)."""
        with self._write() as conn:
            conn.executemany(
                "UPDATE transitions SET embedding = ? WHERE id = ?",
                ((np.ascontiguousarray(v, dtype=np.float32).tobytes(), i) for i, v in items),
            )

    def set_reasoning(self, items: Iterable[tuple[str, int, str]]) -> int:
        """Record reasoning traces for stored steps, given as (episode id, step, reasoning).

        Returns the number of rows updated.

        Used by reasoning annotation: each call commits in one transaction, so an interrupted run keeps
        every trace already written and can resume where it stopped.
        """
        with self._write() as conn:
            cursor = conn.executemany(
                "UPDATE transitions SET reasoning = ? WHERE episode_id = ? AND step = ?",
                ((r, e, int(s)) for e, s, r in items),
            )
            return int(cursor.rowcount)

    def iter_pairs(self, batch_size: int = 10_000) -> Iterator[list[tuple[int, str, str]]]:
        """Yield batches of (id, state, action) for re-embedding."""
        last = 0
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT id, state, action FROM transitions WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch_size),
                ).fetchall()
            if not rows:
                return
            yield [(int(i), s, a) for i, s, a in rows]
            last = int(rows[-1][0])

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


def open_store(location: str, busy_timeout_s: float = 30.0, synchronous: str = "NORMAL") -> Store:
    """The store at ``location``: PostgreSQL for a ``postgresql://`` URL, else a SQLite file (or memory).

    Args:
        location: A SQLite file, ``":memory:"``, or ``postgresql://user:password@host:port/dbname``.
        busy_timeout_s: How long a writer waits for another writer's lock (and, for PostgreSQL, the
            connect timeout).
        synchronous: SQLite's ``synchronous`` pragma (PostgreSQL commits are durable by the server's
            own settings).
    """
    if is_postgres_url(location):
        from dreamgym_env.buffer.store_postgres import PostgresTransitionStore

        return PostgresTransitionStore(location, busy_timeout_s)
    return TransitionStore(location, busy_timeout_s, synchronous)
