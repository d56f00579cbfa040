"""The replay buffer's store in PostgreSQL: one buffer for every process of a cluster.

The same API and guarantees as the SQLite :class:`~dreamgym_env.storage.transitions_sqlite.TransitionStore`:

- a batch is one transaction, committed whole or not at all (a writer killed mid-batch loses its
  connection, and the server rolls the batch back);
- ids come from a sequence and are never reused; writers are serialised by an ``EXCLUSIVE`` lock on
  the transitions table (see :mod:`dreamgym_env.storage.postgres`), so ids become visible in
  increasing order and every process's in-memory index catches up by ``id > watermark`` and by the
  append-only ``buffer_evictions`` log;
- :meth:`PostgresTransitionStore.data_version` changes when another process commits a batch and not
  for this process's own commits, which saves a read-back after each of its own writes.

The statements are the SQLite store's, written once in
:class:`~dreamgym_env.storage.transitions.SQLTransitionStore` on the tables of
:mod:`dreamgym_env.storage.tables`; this module keeps what is PostgreSQL's own: the whole batch
inserted in one ``unnest`` statement, evictions in one data-modifying statement, the id sequence and
the commit counter.

Tables carry a ``buffer_`` prefix, so the task pool (``curriculum_`` tables) may share the database.
Several buffers in one database live in separate schemas: add ``?options=-csearch_path%3Dmyschema``
to the URL (the schema must exist).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from dreamgym_env.records import Transition
from dreamgym_env.storage.tables import Executor, PostgresTables
from dreamgym_env.storage.transitions import COLUMNS, SQLTransitionStore, row_values

_ARRAY_TYPES = (
    "bytea[]", "text[]", "text[]", "text[]", "text[]", "int[]", "text[]", "text[]", "text[]",
    "float8[]", "bool[]", "bool[]", "text[]", "text[]", "float8[]", "text[]", "bytea[]",
)  # fmt: skip
_INSERT = (
    f"INSERT INTO buffer_transitions ({COLUMNS}) "
    "SELECT * FROM unnest(" + ", ".join(f"%s::{t}" for t in _ARRAY_TYPES) + ") "
    "ON CONFLICT (dedup_key) DO NOTHING RETURNING id, dedup_key"
)


class PostgresTransitionStore(SQLTransitionStore):
    """PostgreSQL storage of transitions, their dedup keys and embeddings.

    A pool of connections per store object, usable from several threads; each process opens its own
    store on the same URL. Reads inside a :meth:`transaction` block (``count``, ``get``, ...) run on
    other pooled connections, so they see committed rows only, not the block's own writes (on SQLite,
    one connection, they see them).

    Args:
        url: ``postgresql://user:password@host:port/dbname``.
        busy_timeout_s: Connect timeout and how long a writer waits for another writer's lock.
        max_connections: Connections the store's pool may hold.
    """

    _meta, _transitions, _evictions = "buffer_meta", "buffer_transitions", "buffer_evictions"
    _seed = ("INSERT INTO buffer_meta (key, value) VALUES ('commits', '0') ON CONFLICT DO NOTHING",)
    _db: PostgresTables

    def __init__(self, url: str, busy_timeout_s: float = 30.0, max_connections: int = 4) -> None:
        self._db = PostgresTables(
            url,
            what="replay buffer",
            lock_table="buffer_transitions",
            timeout_s=busy_timeout_s,
            max_connections=max_connections,
        )
        self.path = self._db.location
        self._counter_lock = threading.Lock()
        self._own_commits = 0
        self._create()
        self._check_schema_version()

    def _insert_rows(
        self, tx: Executor, transitions: Sequence[Transition], keys: Sequence[bytes], embeddings: np.ndarray
    ) -> list[int | None]:
        """The whole batch in one statement (one array per column); ``RETURNING`` names the new rows."""
        columns = [list(c) for c in zip(*map(row_values, transitions, keys, embeddings), strict=True)]
        returned = tx.conn.cursor(binary=True).execute(_INSERT, columns).fetchall()
        new_ids = {bytes(key): int(row_id) for row_id, key in returned}
        # a key repeated within the batch: its first occurrence is stored
        return [new_ids.pop(bytes(key), None) for key in keys]

    def _evict_oldest(self, tx: Executor, n: int) -> list[int]:
        """Delete and log in one data-modifying statement."""
        rows = tx.rows(
            "WITH gone AS (DELETE FROM buffer_transitions WHERE id IN ("
            "  SELECT id FROM buffer_transitions WHERE source = 'sim' ORDER BY id LIMIT ?"
            ") RETURNING id, domain) "
            "INSERT INTO buffer_evictions (id, domain) SELECT id, domain FROM gone ORDER BY id RETURNING id",
            (n,),
        )
        return sorted(int(r[0]) for r in rows)

    def _before_commit(self, tx: Executor) -> None:
        """Count the commit in the database, under the writer lock, for :meth:`data_version`."""
        tx.count("UPDATE buffer_meta SET value = (value::bigint + 1)::text WHERE key = 'commits'")

    def _after_commit(self) -> None:
        """Count it as this store's own, which :meth:`data_version` leaves out."""
        with self._counter_lock:
            self._own_commits += 1

    # -- what only PostgreSQL needs -----------------------------------------------------------------

    def max_id(self) -> int:
        """The largest row id ever handed out (0 for a new store), read from the id sequence."""
        rows = self._db.rows(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM buffer_transitions_id_seq"
        )
        return int(rows[0][0])

    def data_version(self) -> int:
        """Changes whenever another process commits a batch, never for this store's own commits.

        The ``commits`` counter is bumped inside every insert transaction (under the writer lock);
        subtracting this store's own commits leaves the others'.
        """
        (value,) = self._db.rows("SELECT value FROM buffer_meta WHERE key = 'commits'")[0]
        with self._counter_lock:
            return int(value) - self._own_commits
