"""The curriculum's task pool in SQL: its tables, their schema version and every statement on them.

Stored in SQLite (WAL mode), the same engine as the replay buffer, or in PostgreSQL when the location
is a ``postgresql://`` URL, so every worker of a cluster records into one pool and the curriculum's
statistics cover all their outcomes. Tables carry a ``curriculum_`` prefix, so the pool may live in
the buffer's own database (file or server) or beside it. Every write is one transaction: a process
killed at any moment leaves each task and each outcome either fully committed or absent, and a
reopened pool holds exactly what was committed. Writers take the pool's write lock up front on both
engines, so outcome sequence numbers become visible in increasing order and
``recent_outcomes(after=seq)`` is a complete catch-up.

:class:`TaskPoolStore` stores each task with the family it is given; the curriculum's
:class:`~dreamgym_env.curriculum.pool.TaskPool` is this store with the families it reports by.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dreamgym_env.errors import StoreError
from dreamgym_env.records import Task
from dreamgym_env.storage.tables import SQLiteTables, open_tables, where

_POOL_SCHEMA_VERSION = 1

Origin = Literal["seed", "generated", "external"]
"""How a task entered the pool: given by the user or a domain (``seed``), proposed by the curriculum
generator (``generated``), or first seen when an episode was pinned to it (``external``; recorded
but never sampled)."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS curriculum_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS curriculum_tasks (
    seq {serial},
    task_id TEXT NOT NULL UNIQUE,
    domain TEXT NOT NULL,
    instruction TEXT NOT NULL,
    metadata TEXT NOT NULL,
    source TEXT NOT NULL,
    parent_id TEXT,
    origin TEXT NOT NULL CHECK (origin IN ('seed', 'generated', 'external')),
    family TEXT NOT NULL,
    depth INTEGER NOT NULL,
    created_at {double} NOT NULL,
    created_episode INTEGER NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS curriculum_tasks_domain ON curriculum_tasks (domain, origin)",
    """CREATE TABLE IF NOT EXISTS curriculum_outcomes (
    seq {serial},
    task_id TEXT NOT NULL,
    reward {double} NOT NULL,
    success INTEGER NOT NULL,
    timestamp {double} NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS curriculum_outcomes_task ON curriculum_outcomes (task_id, seq)",
    """CREATE TABLE IF NOT EXISTS curriculum_rejections (
    seq {serial},
    domain TEXT NOT NULL,
    parent_id TEXT,
    stage TEXT NOT NULL,
    reason TEXT NOT NULL,
    candidate TEXT NOT NULL,
    created_at {double} NOT NULL
)""",
    "INSERT INTO curriculum_meta (key, value) VALUES "
    f"('schema_version', '{_POOL_SCHEMA_VERSION}') ON CONFLICT DO NOTHING",
)
_SETUP_LOCK = 0x44474355  # PostgreSQL's advisory lock key for schema creation ("DGCU")


@dataclass(frozen=True)
class PoolTask:
    """A task with its place in the pool.

    Attributes:
        task: The task itself (``parent_id`` set for generated tasks).
        origin: ``seed``, ``generated`` or ``external``.
        family: See :func:`task_family`.
        depth: 0 for seeds and external tasks, parent's depth + 1 for generated ones.
        created_at: Unix time of insertion.
        created_episode: Episodes recorded in the pool when the task was added (the x axis of growth plots).
        seq: Insertion order.
    """

    task: Task
    origin: Origin
    family: str
    depth: int
    created_at: float
    created_episode: int
    seq: int

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.task.task_id


@dataclass(frozen=True)
class Outcome:
    """One finished episode of a task."""

    seq: int
    task_id: str
    reward: float
    success: bool
    timestamp: float


@dataclass(frozen=True)
class Rejection:
    """A generated candidate that did not enter the pool, and why.

    Attributes:
        stage: Which check refused it: ``backend`` (the request failed), ``parse`` (the answer is not
            valid JSON in the requested schema), ``validator`` (the domain validator), ``duplicate``
            (too similar to a pool task), ``drift`` (too far from its parent to be a variant) or
            ``selection`` (valid, but another candidate of the same parent was kept).
        reason: A sentence saying what was wrong.
        candidate: The candidate as received (a dict of fields, or raw text when unparsable).
        parent_id: The task it was a variant of.
        domain: Its domain.
    """

    stage: str
    reason: str
    candidate: dict[str, Any] | str
    parent_id: str | None
    domain: str


class TaskPoolStore:
    """The task pool's tables in SQLite or PostgreSQL: tasks with their lineage, outcomes and rejections.

    Usable from several threads. Several processes may open the same file (SQLite serialises
    writers, and ``busy_timeout`` makes a writer wait for the lock rather than fail) or, on any
    machine, the same PostgreSQL database (writers take the pool's table lock in turn). The
    arguments are :class:`~dreamgym_env.curriculum.pool.TaskPool`'s.
    """

    def __init__(
        self,
        path: str = ":memory:",
        busy_timeout_s: float = 30.0,
        synchronous: str = "NORMAL",
        *,
        read_only: bool = False,
    ) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self._db = open_tables(
            str(path),
            what="task pool",
            lock_table="curriculum_outcomes",
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            read_only=read_only,
        )
        self.path = self._db.location  # safe to show: a URL's password is redacted
        if read_only and isinstance(self._db, SQLiteTables):
            self._db.require(
                {"curriculum_meta", "curriculum_tasks", "curriculum_outcomes", "curriculum_rejections"},
                "give the pool file a training run wrote (CurriculumSampler(path))",
            )
        else:
            self._db.setup(
                self._db.dialect.schema(_SCHEMA), lock_key=_SETUP_LOCK, meta_table="curriculum_meta"
            )
        self._check_version()

    def _check_version(self) -> None:
        try:
            version = self._scalar("SELECT value FROM curriculum_meta WHERE key = 'schema_version'")
            if int(version) != _POOL_SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} holds a task pool of schema version {version}; "
                    "this version of dreamgym_env reads "
                    f"version {_POOL_SCHEMA_VERSION}. Use a new pool file or the matching package version."
                )
        except BaseException:
            self._db.close()
            raise

    # ------------------------------------------------------------------ tasks
    def insert_tasks(self, entries: Iterable[tuple[Task, str]], origin: Origin = "seed") -> int:
        """Insert ``(task, family)`` pairs whose task is not in the pool yet (by ``task_id``); return how many were new.

        Re-adding a known id is a no-op, so seeding a reopened pool is safe. A generated task's depth
        is its parent's depth + 1 when the parent is in the pool.
        """
        entries = list(entries)
        if origin not in ("seed", "generated", "external"):
            raise StoreError(f"origin must be 'seed', 'generated' or 'external', got {origin!r}")
        added = 0
        with self._db.write() as tx:
            episodes = tx.rows("SELECT COUNT(*) FROM curriculum_outcomes")[0][0]
            for task, family in entries:
                depth = 0
                if task.parent_id is not None:
                    parent = tx.rows(
                        "SELECT depth FROM curriculum_tasks WHERE task_id = ?", (task.parent_id,)
                    )
                    depth = parent[0][0] + 1 if parent else 1
                added += tx.count(
                    "INSERT INTO curriculum_tasks (task_id, domain, instruction, metadata, source, "
                    "parent_id, origin, family, depth, created_at, created_episode) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        task.task_id,
                        task.domain,
                        task.instruction,
                        _dumps(task.metadata),
                        task.source,
                        task.parent_id,
                        origin,
                        family,
                        depth,
                        time.time(),
                        int(episodes),
                    ),
                )
        return added

    def get(self, task_id: str) -> PoolTask | None:
        """The pool entry of ``task_id``, or ``None``."""
        rows = self._query(f"SELECT {_TASK_COLUMNS} FROM curriculum_tasks WHERE task_id = ?", (task_id,))
        return _pool_task(rows[0]) if rows else None

    def tasks(self, *, domain: str | None = None, origin: Origin | None = None) -> list[PoolTask]:
        """Every task (optionally of one domain and/or origin), in insertion order."""
        condition, params = where(domain=domain, origin=origin)
        rows = self._query(f"SELECT {_TASK_COLUMNS} FROM curriculum_tasks{condition} ORDER BY seq", params)
        return [_pool_task(row) for row in rows]

    def count(self, *, domain: str | None = None, origin: Origin | None = None) -> int:
        """Number of tasks (optionally of one domain and/or origin)."""
        condition, params = where(domain=domain, origin=origin)
        return int(self._scalar(f"SELECT COUNT(*) FROM curriculum_tasks{condition}", params))

    # ------------------------------------------------------------------ outcomes
    def record_outcome(self, task_id: str, reward: float, success: bool) -> int:
        """Append one finished episode of ``task_id`` to its history; return the outcome's sequence number."""
        return self.record_outcomes([(task_id, reward, success)])[0]

    def record_outcomes(self, outcomes: Sequence[tuple[str, float, bool]]) -> list[int]:
        """Append several finished episodes ``(task_id, reward, success)`` in one transaction: all or none.

        Returns their sequence numbers, in order.
        """
        now = time.time()
        with self._db.write() as tx:
            rows = [
                tx.rows(
                    "INSERT INTO curriculum_outcomes (task_id, reward, success, timestamp) VALUES (?, ?, ?, ?) "
                    "RETURNING seq",
                    (task_id, float(reward), int(bool(success)), now),
                )
                for task_id, reward, success in outcomes
            ]
        return [int(r[0][0]) for r in rows]

    def recent_outcomes(
        self, n: int, *, domain: str | None = None, after: int = 0
    ) -> dict[str, list[Outcome]]:
        """The latest ``n`` outcomes of every task (newest first), optionally of one domain's tasks.

        Args:
            n: Outcomes kept per task.
            domain: Only tasks of this domain.
            after: Only outcomes with a sequence number above this one (to catch up incrementally).
        """
        if n < 1:
            raise StoreError(f"n must be at least 1, got {n}")
        join = " JOIN curriculum_tasks t ON t.task_id = o.task_id AND t.domain = ?" if domain else ""
        params: tuple[Any, ...] = (domain, after, n) if domain else (after, n)
        rows = self._query(
            "SELECT seq, task_id, reward, success, timestamp FROM ("
            "  SELECT o.seq, o.task_id, o.reward, o.success, o.timestamp,"
            "         ROW_NUMBER() OVER (PARTITION BY o.task_id ORDER BY o.seq DESC) AS rank"
            f"  FROM curriculum_outcomes o{join} WHERE o.seq > ?"
            ") AS ranked WHERE rank <= ? ORDER BY task_id, seq DESC",
            params,
        )
        history: dict[str, list[Outcome]] = {}
        for seq, task_id, reward, success, timestamp in rows:
            history.setdefault(task_id, []).append(Outcome(seq, task_id, reward, bool(success), timestamp))
        return history

    def outcomes(self, *, task_id: str | None = None) -> Iterator[Outcome]:
        """Every recorded outcome (of one task, if given), oldest first."""
        condition, params = where(task_id=task_id or None)
        for seq, tid, reward, success, timestamp in self._query(
            f"SELECT seq, task_id, reward, success, timestamp FROM curriculum_outcomes{condition} ORDER BY seq",
            params,
        ):
            yield Outcome(seq, tid, reward, bool(success), timestamp)

    def episode_count(self) -> int:
        """Number of outcomes recorded (all tasks, all domains)."""
        return int(self._scalar("SELECT COUNT(*) FROM curriculum_outcomes"))

    # ------------------------------------------------------------------ rejections
    def record_rejections(self, rejections: Sequence[Rejection]) -> None:
        """Keep rejected candidates and their reasons, for the report and for debugging prompts."""
        with self._db.write() as tx:
            tx.many(
                "INSERT INTO curriculum_rejections (domain, parent_id, stage, reason, candidate, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (r.domain, r.parent_id, r.stage, r.reason, _dumps(r.candidate), time.time())
                    for r in rejections
                ],
            )

    def rejections(self, *, limit: int | None = None) -> list[Rejection]:
        """Rejected candidates, newest first; at most ``limit`` of them (``None``: all).

        Raises:
            StoreError: ``limit`` is negative (SQLite would read it as "no limit", PostgreSQL refuses it).
        """
        if limit is not None and int(limit) < 0:
            raise StoreError(f"limit must be None or at least 0, got {limit!r}")
        limit_sql = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._query(
            "SELECT stage, reason, candidate, parent_id, domain FROM curriculum_rejections "
            f"ORDER BY seq DESC{limit_sql}"
        )
        return [
            Rejection(stage, reason, json.loads(candidate), parent, domain)
            for stage, reason, candidate, parent, domain in rows
        ]

    def rejection_counts(self) -> dict[str, int]:
        """Rejected candidates per stage."""
        rows = self._query("SELECT stage, COUNT(*) FROM curriculum_rejections GROUP BY stage ORDER BY stage")
        return {stage: int(n) for stage, n in rows}

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        self._db.close()

    # ------------------------------------------------------------------ helpers
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._db.rows(sql, params)

    def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._query(sql, params)[0][0]


_TASK_COLUMNS = (
    "seq, task_id, domain, instruction, metadata, source, parent_id, origin, family, depth, created_at, "
    "created_episode"
)


def _pool_task(row: tuple[Any, ...]) -> PoolTask:
    (
        seq,
        task_id,
        domain,
        instruction,
        metadata,
        source,
        parent_id,
        origin,
        family,
        depth,
        created,
        episode,
    ) = row
    task = Task(
        task_id=task_id,
        domain=domain,
        instruction=instruction,
        metadata=json.loads(metadata),
        source=source,
        parent_id=parent_id,
    )
    return PoolTask(task, origin, family, int(depth), float(created), int(episode), int(seq))


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"task metadata must be JSON-serialisable to be stored in the pool: {e}") from e
