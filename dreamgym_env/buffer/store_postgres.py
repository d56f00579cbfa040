"""The replay buffer's store in PostgreSQL: one buffer for every process of a cluster.

The same API and guarantees as the SQLite :class:`~dreamgym_env.buffer.store.TransitionStore`:

- a batch is one transaction, committed whole or not at all (a writer killed mid-batch loses its
  connection, and the server rolls the batch back);
- ids come from a sequence and are never reused; writers are serialised by an ``EXCLUSIVE`` lock on
  the transitions table (see :mod:`dreamgym_env.storage.postgres`), so ids become visible in
  increasing order and every process's in-memory index catches up by ``id > watermark`` and by the
  append-only ``buffer_evictions`` log;
- :meth:`PostgresTransitionStore.data_version` changes when another process commits a batch and not
  for this process's own commits, which saves a read-back after each of its own writes.

Tables carry a ``buffer_`` prefix, so the task pool (``curriculum_`` tables) may share the database.
Several buffers in one database live in separate schemas: add ``?options=-csearch_path%3Dmyschema``
to the URL (the schema must exist).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from dreamgym_env.buffer.store import SCHEMA_VERSION, StoredRow, row_to_transition
from dreamgym_env.errors import StoreError
from dreamgym_env.storage.postgres import PostgresPool
from dreamgym_env.types import Transition

__all__ = ["PostgresTransitionStore"]

_SETUP_LOCK = 0x44474255  # advisory lock key for schema creation ("DGBU")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS buffer_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS buffer_transitions (
        id BIGSERIAL PRIMARY KEY,
        dedup_key BYTEA NOT NULL UNIQUE,
        domain TEXT NOT NULL,
        task_id TEXT NOT NULL,
        task TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        state TEXT NOT NULL,
        action TEXT NOT NULL,
        next_state TEXT NOT NULL,
        reward DOUBLE PRECISION NOT NULL,
        done BOOLEAN NOT NULL,
        success BOOLEAN NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('offline', 'sim', 'real')),
        reasoning TEXT,
        timestamp DOUBLE PRECISION NOT NULL,
        metadata TEXT NOT NULL,
        embedding BYTEA NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS buffer_transitions_source ON buffer_transitions (source, id)",
    "CREATE INDEX IF NOT EXISTS buffer_transitions_episode ON buffer_transitions (episode_id)",
    """CREATE TABLE IF NOT EXISTS buffer_evictions (
        seq BIGSERIAL PRIMARY KEY,
        id BIGINT NOT NULL,
        domain TEXT NOT NULL
    )""",
    "INSERT INTO buffer_meta (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING",
    "INSERT INTO buffer_meta (key, value) VALUES ('commits', '0') ON CONFLICT DO NOTHING",
)

_FIELDS = (
    "domain, task_id, task, episode_id, step, state, action, next_state, reward, done, success, source, "
    "reasoning, timestamp, metadata"
)
_ARRAY_TYPES = (
    "bytea[]", "text[]", "text[]", "text[]", "text[]", "int[]", "text[]", "text[]", "text[]",
    "float8[]", "bool[]", "bool[]", "text[]", "text[]", "float8[]", "text[]", "bytea[]",
)  # fmt: skip
_INSERT = (
    f"INSERT INTO buffer_transitions (dedup_key, {_FIELDS}, embedding) "
    "SELECT * FROM unnest(" + ", ".join(f"%s::{t}" for t in _ARRAY_TYPES) + ") "
    "ON CONFLICT (dedup_key) DO NOTHING RETURNING id, dedup_key"
)


class PostgresTransitionStore:
    """PostgreSQL storage of transitions, their dedup keys and embeddings.

    A pool of connections per store object, usable from several threads; each process opens its own
    store on the same URL.

    Args:
        url: ``postgresql://user:password@host:port/dbname``.
        busy_timeout_s: Connect timeout and how long a writer waits for another writer's lock.
        max_connections: Connections the store's pool may hold.
    """

    def __init__(self, url: str, busy_timeout_s: float = 30.0, max_connections: int = 4) -> None:
        self._db = PostgresPool(
            url,
            what="replay buffer",
            lock_table="buffer_transitions",
            timeout_s=busy_timeout_s,
            max_connections=max_connections,
        )
        self.path = self._db.location
        self._counter_lock = threading.Lock()
        self._own_commits = 0
        try:
            with self._db.setup(_SETUP_LOCK) as conn:
                for statement in _SCHEMA:
                    conn.execute(statement, (str(SCHEMA_VERSION),) if "%s" in statement else None)
        except Exception as e:
            self._db.close()
            raise self._db.error("cannot create the tables of", e) from e
        version = int(self.get_meta("schema_version") or 0)
        if version != SCHEMA_VERSION:
            self._db.close()
            raise StoreError(
                f"{self.path} has replay-buffer schema version {version}, this package reads version "
                f"{SCHEMA_VERSION}; export it with the version that wrote it and import it again"
            )

    # -- helpers ------------------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        try:
            with self._db.connection() as conn:
                return conn.cursor(binary=binary).execute(sql, params).fetchall()
        except Exception as e:
            raise self._db.error("cannot read", e) from e

    # -- meta ---------------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a stored setting, or ``None``."""
        rows = self._rows("SELECT value FROM buffer_meta WHERE key = %s", (key,))
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        try:
            with self._db.connection() as conn:
                conn.execute(
                    "INSERT INTO buffer_meta (key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (key, value),
                )
        except Exception as e:
            raise self._db.error("cannot write to", e) from e

    # -- writes -------------------------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[Any]:
        """One transaction around several writes of this thread: all commit at the end, or none do."""
        return self._db.transaction()

    def insert(
        self,
        transitions: Sequence[Transition],
        keys: Sequence[bytes],
        embeddings: np.ndarray,
        max_synthetic: int | None = None,
    ) -> tuple[list[int | None], list[int]]:
        """Insert a batch in one transaction, skipping rows whose dedup key is already stored.

        Same contract as :meth:`TransitionStore.insert <dreamgym_env.buffer.store.TransitionStore.insert>`.
        """
        if not (len(transitions) == len(keys) == len(embeddings)):
            raise ValueError("transitions, keys and embeddings must have the same length")
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        columns: list[list[Any]] = [
            [bytes(k) for k in keys],
            [t.domain for t in transitions],
            [t.task_id for t in transitions],
            [t.task for t in transitions],
            [t.episode_id for t in transitions],
            [int(t.step) for t in transitions],
            [t.state for t in transitions],
            [t.action for t in transitions],
            [t.next_state for t in transitions],
            [float(t.reward) for t in transitions],
            [bool(t.done) for t in transitions],
            [bool(t.success) for t in transitions],
            [t.source for t in transitions],
            [t.reasoning for t in transitions],
            [float(t.timestamp) for t in transitions],
            [json.dumps(t.metadata, ensure_ascii=False, default=str) for t in transitions],
            [v.tobytes() for v in embeddings],
        ]
        evicted: list[int] = []
        try:
            with self._db.write() as conn:
                returned = (
                    conn.cursor(binary=True).execute(_INSERT, columns).fetchall() if transitions else []
                )
                new_ids = {bytes(key): int(row_id) for row_id, key in returned}
                ids: list[int | None] = []
                for key in keys:  # a key repeated within the batch: its first occurrence is stored
                    ids.append(new_ids.pop(bytes(key), None))
                if max_synthetic is not None and any(
                    i is not None and t.source == "sim" for i, t in zip(ids, transitions, strict=True)
                ):
                    evicted = self._evict_synthetic(conn, max_synthetic)
                conn.execute("UPDATE buffer_meta SET value = (value::bigint + 1)::text WHERE key = 'commits'")
        except Exception as e:
            raise self._db.error(f"could not write {len(transitions)} transitions to", e) from e
        with self._counter_lock:
            self._own_commits += 1
        return ids, evicted

    @staticmethod
    def _evict_synthetic(conn: Any, max_synthetic: int) -> list[int]:
        (count,) = conn.execute("SELECT COUNT(*) FROM buffer_transitions WHERE source = 'sim'").fetchone()
        excess = int(count) - max_synthetic
        if excess <= 0:
            return []
        rows = conn.execute(
            "WITH gone AS (DELETE FROM buffer_transitions WHERE id IN ("
            "  SELECT id FROM buffer_transitions WHERE source = 'sim' ORDER BY id LIMIT %s"
            ") RETURNING id, domain) "
            "INSERT INTO buffer_evictions (id, domain) SELECT id, domain FROM gone ORDER BY id RETURNING id",
            (excess,),
        ).fetchall()
        return sorted(int(r[0]) for r in rows)

    def replace_embeddings(self, items: Iterable[tuple[int, np.ndarray]]) -> None:
        """Overwrite stored embeddings (after the embedder changed)."""
        pairs = [(np.ascontiguousarray(v, dtype=np.float32).tobytes(), int(i)) for i, v in items]
        try:
            with self._db.write() as conn:
                conn.cursor().executemany("UPDATE buffer_transitions SET embedding = %s WHERE id = %s", pairs)
        except Exception as e:
            raise self._db.error("could not write embeddings to", e) from e

    def set_reasoning(self, items: Iterable[tuple[str, int, str]]) -> int:
        """Record reasoning traces for stored steps, given as (episode id, step, reasoning); one transaction."""
        rows = [(r, e, int(s)) for e, s, r in items]
        updated = 0
        try:
            with self._db.write() as conn:
                cursor = conn.cursor()
                for row in rows:
                    cursor.execute(
                        "UPDATE buffer_transitions SET reasoning = %s WHERE episode_id = %s AND step = %s",
                        row,
                    )
                    updated += max(cursor.rowcount, 0)
        except Exception as e:
            raise self._db.error("could not write reasoning to", e) from e
        return updated

    # -- reads --------------------------------------------------------------------------------------

    def count(self, *, domain: str | None = None, source: str | None = None) -> int:
        """Number of stored transitions, optionally of one domain and/or source."""
        clauses, params = [], []
        if domain is not None:
            clauses.append("domain = %s")
            params.append(domain)
        if source is not None:
            clauses.append("source = %s")
            params.append(source)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return int(self._rows(f"SELECT COUNT(*) FROM buffer_transitions{where}", params)[0][0])

    def episode_row_ids(self, episode_ids: Iterable[str]) -> dict[str, set[int]]:
        """Ids of the stored transitions of each episode."""
        wanted = list(dict.fromkeys(episode_ids))
        if not wanted:
            return {}
        rows = self._rows(
            "SELECT episode_id, id FROM buffer_transitions WHERE episode_id = ANY(%s)", (wanted,)
        )
        found: dict[str, set[int]] = {e: set() for e in wanted}
        for episode_id, row_id in rows:
            found[episode_id].add(int(row_id))
        return found

    def stats(self) -> list[tuple[str, str, int]]:
        """(domain, source, count) for every stored combination."""
        rows = self._rows(
            "SELECT domain, source, COUNT(*) FROM buffer_transitions GROUP BY domain, source "
            "ORDER BY domain, source"
        )
        return [(str(d), str(s), int(c)) for d, s, c in rows]

    def max_id(self) -> int:
        """The largest row id ever handed out (0 for a new store)."""
        rows = self._rows(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM buffer_transitions_id_seq"
        )
        return int(rows[0][0])

    def max_eviction_seq(self) -> int:
        """The sequence number of the latest eviction (0 when none happened)."""
        return int(self._rows("SELECT COALESCE(MAX(seq), 0) FROM buffer_evictions")[0][0])

    def rows_after(self, watermark: int, batch_size: int = 50_000) -> Iterator[list[StoredRow]]:
        """Yield, in batches, the (id, domain, episode, embedding) of every row with ``id > watermark``."""
        last = watermark
        while True:
            rows = self._rows(
                "SELECT id, domain, episode_id, embedding FROM buffer_transitions WHERE id > %s "
                "ORDER BY id LIMIT %s",
                (last, batch_size),
                binary=True,
            )
            if not rows:
                return
            yield [StoredRow(int(i), d, e, np.frombuffer(b, dtype=np.float32)) for i, d, e, b in rows]
            last = int(rows[-1][0])

    def evictions_after(self, seq: int) -> list[tuple[int, int, str]]:
        """(seq, id, domain) of every eviction after ``seq``."""
        rows = self._rows("SELECT seq, id, domain FROM buffer_evictions WHERE seq > %s ORDER BY seq", (seq,))
        return [(int(s), int(i), str(d)) for s, i, d in rows]

    def get(self, ids: Sequence[int]) -> dict[int, Transition]:
        """Fetch transitions by id, in the order of ``ids``; ids no longer stored (evicted) are absent."""
        if not ids:
            return {}
        rows = self._rows(
            f"SELECT id, {_FIELDS} FROM buffer_transitions WHERE id = ANY(%s)", ([int(i) for i in ids],)
        )
        by_id = {int(r[0]): r for r in rows}
        return {i: row_to_transition(by_id[i][1:]) for i in ids if i in by_id}

    def data_version(self) -> int:
        """Changes whenever another process commits a batch, never for this store's own commits.

        The ``commits`` counter is bumped inside every insert transaction (under the writer lock);
        subtracting this store's own commits leaves the others'.
        """
        (value,) = self._rows("SELECT value FROM buffer_meta WHERE key = 'commits'")[0]
        with self._counter_lock:
            return int(value) - self._own_commits

    def iter_transitions(
        self, *, domain: str | None = None, source: str | None = None, batch_size: int = 10_000
    ) -> Iterator[Transition]:
        """Yield every stored transition in insertion order, optionally of one domain and/or source."""
        clauses, params = ["id > %s"], []
        if domain is not None:
            clauses.append("domain = %s")
            params.append(domain)
        if source is not None:
            clauses.append("source = %s")
            params.append(source)
        last = 0
        while True:
            rows = self._rows(
                f"SELECT id, {_FIELDS} FROM buffer_transitions WHERE {' AND '.join(clauses)} "
                "ORDER BY id LIMIT %s",
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
            rows = self._rows(
                "SELECT id, state, action FROM buffer_transitions WHERE id > %s ORDER BY id LIMIT %s",
                (last, batch_size),
            )
            if not rows:
                return
            yield [(int(i), s, a) for i, s, a in rows]
            last = int(rows[-1][0])

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._db.close()
