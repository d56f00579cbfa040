"""The curriculum's durable task pool: seed and generated tasks, their lineage and every episode outcome.

The tables and every statement on them are :class:`~dreamgym_env.storage.task_pool.TaskPoolStore`'s
(SQLite or PostgreSQL; see :mod:`dreamgym_env.storage.task_pool` for the guarantees); what is the
curriculum's own is the family each task is reported under (:func:`task_family`).
"""

from __future__ import annotations

from collections.abc import Iterable

from dreamgym_env.records import Task
from dreamgym_env.storage.task_pool import Origin, TaskPoolStore


def task_family(task: Task) -> str:
    """The family a task is reported under: what kind of goal it is, across seeds and their variants.

    WebShop: the product ``category``; ALFWorld: the ``task_type``; WebArena: the first of ``sites``;
    any other domain: the domain name. A task without the field falls back to the domain name.
    """
    meta = task.metadata
    key = {"webshop": "category", "alfworld": "task_type"}.get(task.domain)
    if key and isinstance(meta.get(key), str) and meta[key]:
        return f"{task.domain}/{meta[key]}"
    sites = meta.get("sites")
    if task.domain == "webarena" and isinstance(sites, list) and sites and isinstance(sites[0], str):
        return f"webarena/{sites[0]}"
    return task.domain


class TaskPool(TaskPoolStore):
    """Durable storage of the curriculum's tasks and outcome history.

    Usable from several threads. Several processes may open the same file (SQLite serialises
    writers, and ``busy_timeout`` makes a writer wait for the lock rather than fail) or, on any
    machine, the same PostgreSQL database (writers take the pool's table lock in turn).

    Args:
        path: Database file (created if missing; may be the replay buffer's file), ``":memory:"``,
            or a PostgreSQL URL (``postgresql://user:password@host:5432/dbname``; needs the
            ``postgres`` extra; may be the replay buffer's database). :attr:`path` keeps it with
            any password redacted.
        busy_timeout_s: How long to wait for another writer's lock (and, for PostgreSQL, to connect).
        synchronous: SQLite only: ``"NORMAL"`` (survives process crashes) or ``"FULL"`` (also power loss).
        read_only: SQLite only: open an existing pool for reading (``mode=ro``), for tools that must
            leave the file as it was (``dreamgym curriculum stats|plot``): no table is created, writes
            fail, and a file that is not a task pool (a replay buffer, a recording) is refused,
            saying what it is.

    Example:
        >>> pool = TaskPool("runs/curriculum.sqlite")
        >>> pool.add_tasks(get_domain("webshop").seed_tasks(), origin="seed")
        >>> pool.record_outcome("webshop-seed-0", reward=1.0, success=True)
    """

    def add_tasks(self, tasks: Iterable[Task], origin: Origin = "seed") -> int:
        """Insert tasks that are not in the pool yet (by ``task_id``); return how many were new.

        Re-adding a known id is a no-op, so seeding a reopened pool is safe. A generated task's depth
        is its parent's depth + 1 when the parent is in the pool.
        """
        return self.insert_tasks(((task, task_family(task)) for task in tasks), origin)

    def __len__(self) -> int:
        return self.count()

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, str) and self.get(task_id) is not None

    def __enter__(self) -> TaskPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TaskPool(path={self.path!r})"
