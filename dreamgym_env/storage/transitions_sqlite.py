"""The replay buffer's store in SQLite (WAL mode): the embedded default, one file per buffer.

It runs the statements written once in :class:`~dreamgym_env.storage.transitions.SQLTransitionStore`
on the tables of :mod:`dreamgym_env.storage.tables`; this module keeps what is SQLite's own (the
insert's ``lastrowid``, ``AUTOINCREMENT``'s record of the largest id, ``PRAGMA data_version``).

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

from collections.abc import Sequence

import numpy as np

from dreamgym_env.records import Transition
from dreamgym_env.storage.tables import Executor, SQLiteTables
from dreamgym_env.storage.transitions import COLUMNS, SQLTransitionStore, row_values

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

    _meta, _transitions, _evictions = "meta", "transitions", "evictions"
    _db: SQLiteTables

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
        self._db = SQLiteTables(
            path,
            what="replay buffer",
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            read_only=read_only,
        )
        # A reader, or a writer that must not make a buffer: opening would add the tables (a task pool
        # may share the buffer's file), and "0 transitions" would hide that the path names something else.
        if read_only or (not create and path != ":memory:"):
            self._db.require(
                {self._meta, self._transitions, self._evictions},
                "give a buffer file (`dreamgym buffer import` makes one)",
            )
        if not read_only:
            self._create()
        self._check_schema_version()

    def _insert_rows(
        self, tx: Executor, transitions: Sequence[Transition], keys: Sequence[bytes], embeddings: np.ndarray
    ) -> list[int | None]:
        """One ``INSERT`` per row: ``lastrowid`` is the new id, a zero rowcount a known dedup key."""
        cursor = tx.conn.cursor()
        ids: list[int | None] = []
        for t, key, vector in zip(transitions, keys, embeddings, strict=True):
            cursor.execute(_INSERT, row_values(t, key, vector))
            ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
        return ids

    def _evict_oldest(self, tx: Executor, n: int) -> list[int]:
        rows = tx.rows("SELECT id, domain FROM transitions WHERE source = 'sim' ORDER BY id LIMIT ?", (n,))
        tx.many("INSERT INTO evictions (id, domain) VALUES (?, ?)", rows)
        tx.many("DELETE FROM transitions WHERE id = ?", [(r[0],) for r in rows])
        return [int(r[0]) for r in rows]

    # -- what only SQLite knows ---------------------------------------------------------------------

    def max_id(self) -> int:
        """The largest row id ever handed out (0 for a new store): ``AUTOINCREMENT``'s own record."""
        rows = self._db.rows("SELECT seq FROM sqlite_sequence WHERE name = 'transitions'")
        return 0 if not rows else int(rows[0][0])

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever another connection commits, never for our own commits.

        One cheap pragma tells a reader whether anything but its own writes could have changed the file.
        """
        return int(self._db.rows("PRAGMA data_version")[0][0])
