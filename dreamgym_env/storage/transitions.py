"""The replay buffer's SQL: its tables and statements, written once for SQLite and PostgreSQL.

Both stores keep the same rows and answer the same questions, so every statement whose text is the
same on both engines lives here in :class:`SQLTransitionStore`, and runs through the store's
:class:`~dreamgym_env.storage.tables.Tables` (the same layer as the task pool's), whose dialect
spells placeholders, list parameters and column types. PostgreSQL's tables carry a ``buffer_``
prefix so the task pool may share the database.

Each engine's module keeps what really differs (:mod:`~dreamgym_env.storage.transitions_sqlite`,
:mod:`~dreamgym_env.storage.transitions_postgres`): how a batch is inserted and its new ids learnt,
how the oldest synthetic rows are evicted, where the largest id ever handed out is read, and how
:meth:`~SQLTransitionStore.data_version` notices other processes' commits. The replay buffer opens
one through :func:`~dreamgym_env.buffer.store.open_store`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dreamgym_env.errors import StoreError
from dreamgym_env.records import Transition
from dreamgym_env.storage.tables import Executor, PostgresTables, SQLiteTables, where

SCHEMA_VERSION = 1

_SETUP_LOCK = 0x44474255  # PostgreSQL's advisory lock key for schema creation ("DGBU")

FIELDS = (
    "domain, task_id, task, episode_id, step, state, action, next_state, reward, done, success, source, "
    "reasoning, timestamp, metadata"
)
"""The columns :func:`row_to_transition` reads, in its order."""

COLUMNS = f"dedup_key, {FIELDS}, embedding"
"""Every column an insert writes, in the order of :func:`row_values`."""


@dataclass(frozen=True)
class StoredRow:
    """A row's id, domain, episode and embedding: what an index needs, without the text."""

    id: int
    domain: str
    episode_id: str
    embedding: np.ndarray


def row_to_transition(row: Sequence[Any]) -> Transition:
    """A :class:`Transition` from the stored columns, in the order of ``FIELDS``."""
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


def row_values(t: Transition, key: bytes, vector: np.ndarray) -> tuple[Any, ...]:
    """The values of one transition's row, in the order of ``COLUMNS``.

    Booleans stay ``bool``: PostgreSQL stores them as ``BOOLEAN``, SQLite as the integers 0 and 1.
    """
    return (
        bytes(key),
        t.domain,
        t.task_id,
        t.task,
        t.episode_id,
        int(t.step),
        t.state,
        t.action,
        t.next_state,
        float(t.reward),
        bool(t.done),
        bool(t.success),
        t.source,
        t.reasoning,
        float(t.timestamp),
        json.dumps(t.metadata, ensure_ascii=False, default=str),
        np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
    )


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {transitions} (
    id {serial},
    dedup_key {blob} NOT NULL UNIQUE,
    domain TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    state TEXT NOT NULL,
    action TEXT NOT NULL,
    next_state TEXT NOT NULL,
    reward {double} NOT NULL,
    done {boolean} NOT NULL,
    success {boolean} NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('offline', 'sim', 'real')),
    reasoning TEXT,
    timestamp {double} NOT NULL,
    metadata TEXT NOT NULL,
    embedding {blob} NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS {transitions}_source ON {transitions} (source, id)",
    "CREATE INDEX IF NOT EXISTS {transitions}_episode ON {transitions} (episode_id)",
    "CREATE TABLE IF NOT EXISTS {evictions} (seq {serial}, id {bigint} NOT NULL, domain TEXT NOT NULL)",
)


class SQLTransitionStore(ABC):
    """The statements both transition stores share; a subclass opens the engine's tables.

    Reads go through :meth:`Tables.rows <dreamgym_env.storage.tables.Tables.rows>`; writes run in one
    :meth:`Tables.write <dreamgym_env.storage.tables.Tables.write>` transaction each, which turns
    the engine's errors into a :class:`StoreError`.
    """

    _meta: ClassVar[str]
    _transitions: ClassVar[str]
    _evictions: ClassVar[str]
    _seed: ClassVar[tuple[str, ...]] = ()
    """Statements run after the schema's when the tables are made."""
    _db: SQLiteTables | PostgresTables
    path: str

    # -- hooks --------------------------------------------------------------------------------------

    @abstractmethod
    def _insert_rows(
        self, tx: Executor, transitions: Sequence[Transition], keys: Sequence[bytes], embeddings: np.ndarray
    ) -> list[int | None]:
        """Insert a batch skipping known dedup keys; the new id of each row, ``None`` for a duplicate."""

    @abstractmethod
    def _evict_oldest(self, tx: Executor, n: int) -> list[int]:
        """Delete the ``n`` oldest ``sim`` rows, logging each in the evictions table; their ids, ascending."""

    def _before_commit(self, tx: Executor) -> None:
        """Called inside every insert transaction, after its rows and evictions are written."""
        return None  # nothing by default

    def _after_commit(self) -> None:
        """Called after every insert transaction has committed (or joined an open :meth:`transaction`)."""
        return None  # nothing by default

    def _create(self) -> None:
        """Make the tables and indexes that are missing, and record the schema version in a new store."""
        schema = self._db.dialect.schema(
            _SCHEMA, meta=self._meta, transitions=self._transitions, evictions=self._evictions
        )
        version = (
            f"INSERT INTO {self._meta} (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}') "
            "ON CONFLICT DO NOTHING"
        )
        self._db.setup([*schema, version, *self._seed], lock_key=_SETUP_LOCK, meta_table=self._meta)

    def _check_schema_version(self) -> None:
        version = int(self.get_meta("schema_version") or 0)
        if version != SCHEMA_VERSION:
            self.close()
            raise StoreError(
                f"{self.path} has replay-buffer schema version {version}, this package reads version "
                f"{SCHEMA_VERSION}; export it with the version that wrote it and import it again"
            )

    def transaction(self) -> AbstractContextManager[Any]:
        """One transaction around several writes: they all commit at the end of the block, or none do.

        Writes inside it (``insert``, ``set_meta``, ...) become savepoints of it. The writer lock is
        held for the whole block, so other writers wait for it (up to their busy timeout).
        """
        return self._db.transaction()

    def close(self) -> None:
        """Close the connection(s) (idempotent)."""
        self._db.close()

    # -- meta ---------------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a stored setting, or ``None``."""
        rows = self._db.rows(f"SELECT value FROM {self._meta} WHERE key = ?", (key,))
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting (inside :meth:`transaction`, as part of it)."""
        with self._db.write() as tx:
            tx.count(
                f"INSERT INTO {self._meta} (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writes -------------------------------------------------------------------------------------

    def insert(
        self,
        transitions: Sequence[Transition],
        keys: Sequence[bytes],
        embeddings: np.ndarray,
        max_synthetic: int | None = None,
    ) -> tuple[list[int | None], list[int]]:
        """Insert a batch in one transaction, skipping rows whose dedup key is already stored.

        A key repeated within the batch is stored once, for its first occurrence.

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
        evicted: list[int] = []
        with self._db.write(f"could not write {len(transitions)} transitions to") as tx:
            ids = self._insert_rows(tx, transitions, keys, embeddings) if transitions else []
            if max_synthetic is not None and any(
                i is not None and t.source == "sim" for i, t in zip(ids, transitions, strict=True)
            ):
                count = int(tx.rows(f"SELECT COUNT(*) FROM {self._transitions} WHERE source = 'sim'")[0][0])
                if count > max_synthetic:
                    evicted = self._evict_oldest(tx, count - max_synthetic)
            self._before_commit(tx)
        self._after_commit()
        return ids, evicted

    def replace_embeddings(self, items: Iterable[tuple[int, np.ndarray]]) -> None:
        """Overwrite stored embeddings (after the embedder changed), in one transaction."""
        pairs = [(np.ascontiguousarray(v, dtype=np.float32).tobytes(), int(i)) for i, v in items]
        with self._db.write("could not write embeddings to") as tx:
            tx.many(f"UPDATE {self._transitions} SET embedding = ? WHERE id = ?", pairs)

    def set_reasoning(self, items: Iterable[tuple[str, int, str]]) -> int:
        """Record reasoning traces for stored steps, given as (episode id, step, reasoning).

        Returns the number of rows updated.

        Used by reasoning annotation: each call commits in one transaction, so an interrupted run keeps
        every trace already written and can resume where it stopped.
        """
        rows = [(r, e, int(s)) for e, s, r in items]
        with self._db.write("could not write reasoning to") as tx:
            return tx.many(
                f"UPDATE {self._transitions} SET reasoning = ? WHERE episode_id = ? AND step = ?", rows
            )

    # -- reads --------------------------------------------------------------------------------------

    def count(self, *, domain: str | None = None, source: str | None = None) -> int:
        """Number of stored transitions, optionally of one domain and/or source."""
        condition, params = where(domain=domain, source=source)
        return int(self._db.rows(f"SELECT COUNT(*) FROM {self._transitions}{condition}", params)[0][0])

    def episode_row_ids(self, episode_ids: Iterable[str]) -> dict[str, set[int]]:
        """Ids of the stored transitions of each episode (read from the episode index, no row is touched)."""
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted:
            return {}
        found: dict[str, set[int]] = {e: set() for e in wanted}
        for chunk in self._db.dialect.chunks(wanted):
            condition, params = self._db.dialect.member("episode_id", chunk)
            rows = self._db.rows(f"SELECT episode_id, id FROM {self._transitions} WHERE {condition}", params)
            for episode_id, row_id in rows:
                found[episode_id].add(int(row_id))
        return found

    def stats(self) -> list[tuple[str, str, int]]:
        """(domain, source, count) for every stored combination."""
        rows = self._db.rows(
            f"SELECT domain, source, COUNT(*) FROM {self._transitions} GROUP BY domain, source "
            "ORDER BY domain, source"
        )
        return [(str(d), str(s), int(c)) for d, s, c in rows]

    def max_eviction_seq(self) -> int:
        """The sequence number of the latest eviction (0 when none happened)."""
        return int(self._db.rows(f"SELECT COALESCE(MAX(seq), 0) FROM {self._evictions}")[0][0])

    def rows_after(self, watermark: int, batch_size: int = 50_000) -> Iterator[list[StoredRow]]:
        """Yield, in batches, the (id, domain, episode, embedding) of every row with ``id > watermark``."""
        last = watermark
        while True:
            rows = self._db.rows(
                f"SELECT id, domain, episode_id, embedding FROM {self._transitions} WHERE id > ? "
                "ORDER BY id LIMIT ?",
                (last, batch_size),
                binary=True,
            )
            if not rows:
                return
            yield [StoredRow(int(i), d, e, np.frombuffer(b, dtype=np.float32)) for i, d, e, b in rows]
            last = int(rows[-1][0])

    def evictions_after(self, seq: int) -> list[tuple[int, int, str]]:
        """(seq, id, domain) of every eviction after ``seq``."""
        rows = self._db.rows(
            f"SELECT seq, id, domain FROM {self._evictions} WHERE seq > ? ORDER BY seq", (seq,)
        )
        return [(int(s), int(i), str(d)) for s, i, d in rows]

    def get(self, ids: Sequence[int]) -> dict[int, Transition]:
        """Fetch transitions by id, in the order of ``ids``; ids no longer stored (evicted) are absent."""
        if not ids:
            return {}
        by_id: dict[int, Sequence[Any]] = {}
        for chunk in self._db.dialect.chunks(list(dict.fromkeys(int(i) for i in ids))):
            condition, params = self._db.dialect.member("id", chunk)
            rows = self._db.rows(f"SELECT id, {FIELDS} FROM {self._transitions} WHERE {condition}", params)
            by_id.update((int(r[0]), r) for r in rows)
        return {i: row_to_transition(by_id[i][1:]) for i in ids if i in by_id}

    def iter_transitions(
        self, *, domain: str | None = None, source: str | None = None, batch_size: int = 10_000
    ) -> Iterator[Transition]:
        """Yield every stored transition in insertion order, optionally of one domain and/or source."""
        condition, params = where("id > ?", domain=domain, source=source)
        last = 0
        while True:
            rows = self._db.rows(
                f"SELECT id, {FIELDS} FROM {self._transitions}{condition} ORDER BY id LIMIT ?",
                [last, *params, batch_size],
            )
            if not rows:
                return
            for r in rows:
                yield row_to_transition(r[1:])
            last = int(rows[-1][0])

    def iter_pairs(self, batch_size: int = 10_000) -> Iterator[list[tuple[int, str, str]]]:
        """Yield batches of (id, state, action) for re-embedding."""
        last = 0
        while True:
            rows = self._db.rows(
                f"SELECT id, state, action FROM {self._transitions} WHERE id > ? ORDER BY id LIMIT ?",
                (last, batch_size),
            )
            if not rows:
                return
            yield [(int(i), s, a) for i, s, a in rows]
            last = int(rows[-1][0])
